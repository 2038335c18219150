//! A lint: no import circles between a crate's source files, and no
//! arrow that runs back up between its rooms past a named few.
//!
//! Two files that import each other cannot be read, tested or changed
//! alone, and a circle grows: a helper that lives in a command module
//! pulls the next command in (issue 33 found seven files in one loop).
//! Each file's imports — `use` trees and paths through `crate::`,
//! `super::`, `self::` or a module the file declares — are resolved to
//! the file that defines the module they end in, and a strongly connected
//! set of two or more files is a circle. Test modules (what follows a
//! file's first `#[cfg(test)]`) do not count: they import their parent by
//! design.
//!
//! A room is a crate's top-level file or folder. Files may import each other without a circle and
//! their rooms still import each other around a loop (`probes/plan.rs`
//! naming `server/replica.rs`'s wait point while `server/` imports
//! `probes/`): the fewest room-to-room arrows that cut every such loop
//! are the arrows that run back up. Each crate has at most one
//! ([`UPWARD_ALLOWED`]).
use std::{
    collections::{BTreeMap, BTreeSet},
    path::{Path, PathBuf},
};

/// A crate's module tree: module path → the file that defines it.
#[derive(Debug, Default)]
pub struct Tree {
    files: BTreeMap<Vec<String>, PathBuf>,
}

impl Tree {
    /// Walks `mod name;` declarations from the crate root file.
    pub fn load(root_file: &Path) -> std::io::Result<Tree> {
        let mut tree = Tree::default();
        let mut todo = vec![(Vec::new(), root_file.to_owned())];
        while let Some((path, file)) = todo.pop() {
            let text = std::fs::read_to_string(&file)?;
            for name in declared_modules(&code_of(&text)) {
                let dir = module_dir(&file);
                let candidates = [
                    dir.join(format!("{name}.rs")),
                    dir.join(&name).join("mod.rs"),
                ];
                if let Some(f) = candidates.into_iter().find(|c| c.is_file()) {
                    let mut p = path.clone();
                    p.push(name);
                    todo.push((p, f));
                }
            }
            tree.files.insert(path, file);
        }
        Ok(tree)
    }

    fn is_module(&self, p: &[String]) -> bool {
        self.files.contains_key(p)
    }

    /// The files `module`'s own code imports from.
    fn imports(&self, module: &[String], code: &str) -> BTreeSet<PathBuf> {
        let mut out = BTreeSet::new();
        for path in paths(code) {
            if let Some(target) = self.resolve(module, &path) {
                if target.as_slice() != module {
                    out.insert(self.files[&target].clone());
                }
            }
        }
        out
    }

    /// The module a path, written in `module`, ends in; None when it
    /// leaves the crate.
    fn resolve(&self, module: &[String], path: &[String]) -> Option<Vec<String>> {
        let (mut cur, rest): (Vec<String>, &[String]) = match path.first()?.as_str() {
            "crate" => (Vec::new(), &path[1..]),
            "self" => (module.to_vec(), &path[1..]),
            "super" => {
                let mut cur = module.to_vec();
                let mut i = 0;
                while path.get(i).map(String::as_str) == Some("super") {
                    cur.pop()?;
                    i += 1;
                }
                (cur, &path[i..])
            }
            first => {
                let mut child = module.to_vec();
                child.push(first.to_string());
                if !self.is_module(&child) {
                    return None;
                }
                (module.to_vec(), path)
            }
        };
        for seg in rest {
            let mut next = cur.clone();
            next.push(seg.clone());
            if !self.is_module(&next) {
                break;
            }
            cur = next;
        }
        Some(cur)
    }

    /// Every file's imports.
    fn edges(&self) -> std::io::Result<BTreeMap<PathBuf, BTreeSet<PathBuf>>> {
        let mut edges = BTreeMap::new();
        for (module, file) in &self.files {
            let text = std::fs::read_to_string(file)?;
            edges.insert(file.clone(), self.imports(module, &code_of(&text)));
        }
        Ok(edges)
    }

    /// Every circle: sets of two or more files that import each other,
    /// directly or around a loop, each listed in path order.
    pub fn circles(&self) -> std::io::Result<Vec<Vec<PathBuf>>> {
        Ok(strongly_connected(&self.edges()?)
            .into_iter()
            .filter(|c| c.len() > 1)
            .collect())
    }

    /// The imports inside each circle, `from -> to`: what to cut.
    pub fn circle_edges(&self) -> std::io::Result<Vec<Vec<(PathBuf, PathBuf)>>> {
        let edges = self.edges()?;
        Ok(self
            .circles()?
            .into_iter()
            .map(|c| {
                let mut inside = Vec::new();
                for from in &c {
                    for to in edges.get(from).into_iter().flatten() {
                        if c.contains(to) {
                            inside.push((from.clone(), to.clone()));
                        }
                    }
                }
                inside
            })
            .collect())
    }
}

/// A room: a crate's top-level file or folder (`probes/`, `cli.rs`), as
/// the house is drawn. The crate root is no room.
fn room_of(module: &[String]) -> Option<&String> {
    module.first()
}

/// An arrow between two rooms that runs back up, and the file imports
/// behind it.
pub type Upward = (String, String, Vec<(PathBuf, PathBuf)>);

impl Tree {
    /// The arrows between rooms that run back up: the fewest room-to-room
    /// imports whose removal leaves no loop between rooms (files of one
    /// room importing each other is the room's own affair).
    pub fn upward_arrows(&self) -> std::io::Result<Vec<Upward>> {
        let module_of: BTreeMap<&PathBuf, &Vec<String>> =
            self.files.iter().map(|(m, f)| (f, m)).collect();
        let mut rooms: BTreeMap<PathBuf, BTreeSet<PathBuf>> = BTreeMap::new();
        let mut behind: BTreeMap<(String, String), Vec<(PathBuf, PathBuf)>> = BTreeMap::new();
        for (from, tos) in self.edges()? {
            let Some(a) = module_of.get(&from).and_then(|m| room_of(m)) else {
                continue;
            };
            for to in tos {
                let Some(b) = module_of.get(&to).and_then(|m| room_of(m)) else {
                    continue;
                };
                if a == b {
                    continue;
                }
                rooms
                    .entry(PathBuf::from(a))
                    .or_default()
                    .insert(PathBuf::from(b));
                rooms.entry(PathBuf::from(b)).or_default();
                behind
                    .entry((a.clone(), b.clone()))
                    .or_default()
                    .push((from.clone(), to.clone()));
            }
        }
        let mut out = Vec::new();
        for comp in strongly_connected(&rooms)
            .into_iter()
            .filter(|c| c.len() > 1)
        {
            let inside: Vec<(PathBuf, PathBuf)> = comp
                .iter()
                .flat_map(|a| {
                    rooms[a]
                        .iter()
                        .filter(|b| comp.contains(b))
                        .map(move |b| (a.clone(), b.clone()))
                })
                .collect();
            for (a, b) in fewest_to_cut(&comp, &inside) {
                let key = (a.display().to_string(), b.display().to_string());
                let files = behind.get(&key).cloned().unwrap_or_default();
                out.push((key.0, key.1, files));
            }
        }
        Ok(out)
    }
}

/// The fewest of `edges` (between the `nodes` of one strongly connected
/// set) whose removal leaves no loop, tried by size, smallest first: the
/// sets are a handful of rooms. Past four, all of them.
fn fewest_to_cut(nodes: &[PathBuf], edges: &[(PathBuf, PathBuf)]) -> Vec<(PathBuf, PathBuf)> {
    let acyclic = |kept: &[&(PathBuf, PathBuf)]| {
        let mut g: BTreeMap<PathBuf, BTreeSet<PathBuf>> =
            nodes.iter().map(|n| (n.clone(), BTreeSet::new())).collect();
        for (a, b) in kept {
            g.entry(a.clone()).or_default().insert(b.clone());
        }
        strongly_connected(&g).iter().all(|c| c.len() == 1)
    };
    let n = edges.len();
    for size in 1..=n.min(4) {
        let mut pick: Vec<usize> = (0..size).collect();
        loop {
            let kept: Vec<&(PathBuf, PathBuf)> = (0..n)
                .filter(|i| !pick.contains(i))
                .map(|i| &edges[i])
                .collect();
            if acyclic(&kept) {
                return pick.iter().map(|&i| edges[i].clone()).collect();
            }
            // The next combination of `size` out of `n`.
            let Some(i) = (0..size).rev().find(|&i| pick[i] < n - size + i) else {
                break;
            };
            pick[i] += 1;
            for j in i + 1..size {
                pick[j] = pick[j - 1] + 1;
            }
        }
    }
    edges.to_vec()
}

/// The directory a file's `mod name;` children live in.
fn module_dir(file: &Path) -> PathBuf {
    let dir = file.parent().unwrap_or(Path::new(".")).to_owned();
    match file.file_name().and_then(|n| n.to_str()) {
        Some("lib.rs" | "main.rs" | "mod.rs") => dir,
        _ => dir.join(file.file_stem().unwrap_or_default()),
    }
}

/// A file's code before its test module, with comments, strings and
/// character literals blanked (a `"crate::x"` in a message is no import).
pub fn code_of(text: &str) -> String {
    let text = match text.find("#[cfg(test)]") {
        Some(i) => &text[..i],
        None => text,
    };
    let b: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let next = b.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < b.len() && b[i] != '\n' {
                i += 1;
            }
            continue;
        }
        if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == '/' && b.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if b[i] == '*' && b.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            out.push(' ');
            continue;
        }
        // Raw strings: r"..." and r#"..."#.
        if c == 'r' && matches!(next, Some('"' | '#')) && !ident_before(&b, i) {
            let mut j = i + 1;
            let mut hashes = 0;
            while b.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if b.get(j) == Some(&'"') {
                j += 1;
                'raw: while j < b.len() {
                    if b[j] == '"' && (0..hashes).all(|k| b.get(j + 1 + k) == Some(&'#')) {
                        j += 1 + hashes;
                        break 'raw;
                    }
                    j += 1;
                }
                out.push_str("\"\"");
                i = j;
                continue;
            }
        }
        if c == '"' {
            i += 1;
            while i < b.len() && b[i] != '"' {
                i += if b[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("\"\"");
            continue;
        }
        // A character literal ('x', '\n', '\u{..}'), not a lifetime.
        if c == '\'' {
            let lit = match (next, b.get(i + 2)) {
                (Some('\\'), _) => b[i + 2..]
                    .iter()
                    .position(|&x| x == '\'')
                    .map(|p| i + 3 + p),
                (Some(_), Some('\'')) => Some(i + 3),
                _ => None,
            };
            if let Some(end) = lit {
                out.push_str("' '");
                i = end;
                continue;
            }
        }
        out.push(c);
        i += 1;
    }
    out
}

fn ident_before(b: &[char], i: usize) -> bool {
    i > 0 && (b[i - 1].is_alphanumeric() || b[i - 1] == '_')
}

/// `mod name;` declarations (not inline `mod name { ... }`).
fn declared_modules(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(i) = find_word(rest, "mod") {
        let after = rest[i + 3..].trim_start();
        let end = after.find(|c: char| !is_ident(c)).unwrap_or(after.len());
        let (name, tail) = after.split_at(end);
        if !name.is_empty() && tail.trim_start().starts_with(';') {
            out.push(name.to_string());
        }
        rest = tail;
    }
    out
}

/// Every path in the code: `use` trees expanded to their leaves, and
/// the `a::b::c` paths written elsewhere.
fn paths(code: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut rest = code;
    // `use` trees.
    while let Some(i) = find_word(rest, "use") {
        let after = &rest[i + 3..];
        let end = after.find(';').unwrap_or(after.len());
        expand(&after[..end], &[], &mut out);
        rest = &after[end..];
    }
    // Paths elsewhere.
    let chars: Vec<char> = code.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        if is_ident_start(chars[i]) && (i == 0 || !is_ident(chars[i - 1]) && chars[i - 1] != ':') {
            let mut segs = Vec::new();
            let mut j = i;
            loop {
                let s = j;
                while j < chars.len() && is_ident(chars[j]) {
                    j += 1;
                }
                segs.push(chars[s..j].iter().collect::<String>());
                if chars.get(j) == Some(&':')
                    && chars.get(j + 1) == Some(&':')
                    && chars.get(j + 2).is_some_and(|&c| is_ident_start(c))
                {
                    j += 2;
                } else {
                    break;
                }
            }
            // `a::b::{c, d}` and `a::b::*` are use trees, read whole above:
            // their prefix alone names no import.
            let tree_prefix = chars.get(j) == Some(&':') && chars.get(j + 1) == Some(&':');
            if segs.len() > 1 && !tree_prefix {
                out.push(segs);
            }
            i = j.max(i + 1);
        } else {
            i += 1;
        }
    }
    out
}

fn is_ident_start(c: char) -> bool {
    c.is_alphabetic() || c == '_'
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The byte offset of `word` standing alone.
fn find_word(s: &str, word: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(i) = s[from..].find(word) {
        let at = from + i;
        let before = s[..at].chars().next_back();
        let after = s[at + word.len()..].chars().next();
        if !before.is_some_and(is_ident) && after.is_some_and(char::is_whitespace) {
            return Some(at);
        }
        from = at + word.len();
    }
    None
}

/// Expands one use tree (`a::{b, c::d}`) under `prefix` into paths.
fn expand(tree: &str, prefix: &[String], out: &mut Vec<Vec<String>>) {
    let tree = tree.trim();
    let (head, group) = match tree.find('{') {
        Some(i) => (
            &tree[..i],
            Some(&tree[i + 1..tree.rfind('}').unwrap_or(tree.len())]),
        ),
        None => (tree, None),
    };
    let head = head.split(" as ").next().unwrap_or(head);
    let mut path = prefix.to_vec();
    path.extend(
        head.split("::")
            .map(str::trim)
            .filter(|s| !s.is_empty() && *s != "*")
            .map(String::from),
    );
    match group {
        None => out.push(path),
        Some(g) => {
            let mut depth = 0;
            let mut start = 0;
            for (i, c) in g.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        expand(&g[start..i], &path, out);
                        start = i + 1;
                    }
                    _ => {}
                }
            }
            // (`a::{self, ...}` names `a` itself: a path ending in `self`,
            // which resolves to `a`.)
            if !g[start..].trim().is_empty() {
                expand(&g[start..], &path, out);
            }
        }
    }
}

/// Tarjan's strongly connected components.
fn strongly_connected(edges: &BTreeMap<PathBuf, BTreeSet<PathBuf>>) -> Vec<Vec<PathBuf>> {
    struct State<'a> {
        edges: &'a BTreeMap<PathBuf, BTreeSet<PathBuf>>,
        index: BTreeMap<&'a Path, usize>,
        low: BTreeMap<&'a Path, usize>,
        stack: Vec<&'a Path>,
        on: BTreeSet<&'a Path>,
        out: Vec<Vec<PathBuf>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a Path) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on.insert(v);
        if let Some(next) = s.edges.get(v) {
            for w in next {
                let w = w.as_path();
                if !s.index.contains_key(w) {
                    visit(s, w);
                    let l = s.low[w].min(s.low[v]);
                    s.low.insert(v, l);
                } else if s.on.contains(w) {
                    let l = s.index[w].min(s.low[v]);
                    s.low.insert(v, l);
                }
            }
        }
        if s.low[v] == s.index[v] {
            let mut comp = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on.remove(w);
                comp.push(w.to_owned());
                if w == v {
                    break;
                }
            }
            comp.sort();
            s.out.push(comp);
        }
    }
    let mut s = State {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in edges.keys() {
        if !s.index.contains_key(v.as_path()) {
            visit(&mut s, v);
        }
    }
    s.out
}

/// The crate roots the lint walks.
pub const ROOTS: &[&str] = &[
    "readers/src/lib.rs",
    "tracer/src/lib.rs",
    "tracer/src/main.rs",
    "workload/src/lib.rs",
    "xtask/src/main.rs",
    "testkit/src/lib.rs",
    "tracer-ebpf/src/main.rs",
];

/// How many arrows may run back up between the rooms of a crate, by its
/// root (others: none). The tracer's one: the error room names the fsync
/// probe a refused attach was (`error.rs` -> `probes/fsync_choice.rs`).
/// The workload's one: the per-interval sample carries TPC-C's figures
/// (`stats.rs` -> `tpcc/report.rs`). At most one per crate, so that none
/// is added.
pub const UPWARD_ALLOWED: &[(&str, usize)] =
    &[("tracer/src/lib.rs", 1), ("workload/src/lib.rs", 1)];

/// Fails naming every circle in the workspace's crates, and the arrows
/// that run back up between a crate's rooms past [`UPWARD_ALLOWED`].
pub fn check(root: &Path) -> anyhow::Result<()> {
    let name = |p: &Path| p.strip_prefix(root).unwrap_or(p).display().to_string();
    let mut found = Vec::new();
    let mut over = Vec::new();
    for r in ROOTS {
        let tree = Tree::load(&root.join(r))?;
        for c in tree.circle_edges()? {
            let edges: Vec<String> = c
                .iter()
                .map(|(a, b)| format!("{} -> {}", name(a), name(b)))
                .collect();
            found.push(edges.join(", "));
        }
        let upward = tree.upward_arrows()?;
        let allowed = UPWARD_ALLOWED
            .iter()
            .find(|(root, _)| root == r)
            .map_or(0, |(_, n)| *n);
        if upward.len() > allowed {
            let arrows: Vec<String> = upward
                .iter()
                .map(|(a, b, files)| {
                    let files: Vec<String> = files
                        .iter()
                        .map(|(x, y)| format!("{} -> {}", name(x), name(y)))
                        .collect();
                    format!("{a} -> {b} ({})", files.join(", "))
                })
                .collect();
            over.push(format!(
                "{r}: {} (at most {allowed}):\n    {}",
                upward.len(),
                arrows.join("\n    ")
            ));
        }
    }
    if !found.is_empty() {
        anyhow::bail!(
            "import circles (files that import each other, directly or around a loop; move what they share to a module both import):\n  {}",
            found.join("\n  ")
        );
    }
    if !over.is_empty() {
        anyhow::bail!(
            "arrows that run back up between rooms (a room importing one that imports it, around a loop): move what the lower room needs down, or hand it in from above:\n  {}",
            over.join("\n  ")
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(files: &[(&str, &str)]) -> (tempfile::TempDir, Tree) {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in files {
            let p = dir.path().join(name);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
        let t = Tree::load(&dir.path().join("lib.rs")).unwrap();
        (dir, t)
    }

    fn names(c: &[Vec<PathBuf>]) -> Vec<Vec<String>> {
        c.iter()
            .map(|c| {
                c.iter()
                    .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
                    .collect()
            })
            .collect()
    }

    #[test]
    fn a_parent_and_a_child_that_import_each_other_are_a_circle() {
        let (_d, t) = tree(&[
            ("lib.rs", "pub mod ab {}\npub mod a;\npub mod b;\n"),
            (
                "a/mod.rs",
                "mod fleet;\npub struct Shared;\nfn f() { fleet::go(); }\n",
            ),
            ("a/fleet.rs", "use super::Shared;\npub fn go() {}\n"),
            ("b.rs", "use crate::a::Shared;\n"),
        ]);
        assert_eq!(names(&t.circles().unwrap()), [["fleet.rs", "mod.rs"]]);
    }

    #[test]
    fn a_loop_through_three_files_and_use_groups_are_found() {
        let (_d, t) = tree(&[
            ("lib.rs", "mod a; mod b; mod c;\n"),
            ("a.rs", "use crate::{b::{self, X as Y}, std_like};\n"),
            ("b.rs", "pub struct X; fn f() { crate::c::g() }\n"),
            ("c.rs", "pub fn g() {}\nuse super::a::*;\n"),
        ]);
        assert_eq!(names(&t.circles().unwrap()), [["a.rs", "b.rs", "c.rs"]]);
    }

    #[test]
    fn imports_downward_strings_comments_and_tests_are_no_circle() {
        let (_d, t) = tree(&[
            ("lib.rs", "mod a; mod b; mod d;\n"),
            ("d/mod.rs", "mod e;\nuse crate::b::X;\n"),
            ("d/e.rs", "pub struct E;\n"),
            (
                "a.rs",
                "use crate::b::X;\n// crate::a::f in a comment\nfn f() -> &'static str { \"super::a\" }\nconst C: char = '{';\n",
            ),
            (
                "b.rs",
                "pub struct X;\nconst R: &str = r#\"crate::a::f\"#;\nuse crate::d::{e::E};\n#[cfg(test)]\nmod tests { use crate::a; }\n",
            ),
        ]);
        assert!(t.circles().unwrap().is_empty());
    }

    #[test]
    fn a_room_importing_one_that_imports_it_is_one_upward_arrow() {
        let (_d, t) = tree(&[
            ("lib.rs", "mod low;\nmod high;\n"),
            ("low.rs", "use crate::high::H;\npub struct L;\n"),
            ("high/mod.rs", "mod a;\npub use a::H;\n"),
            ("high/a.rs", "use crate::low::L;\npub struct H;\n"),
        ]);
        // No circle of files (low -> high/mod.rs -> high/a.rs -> low is
        // one): the rooms low and high/ import each other, one arrow
        // runs back up, with the file import behind it.
        let up = t.upward_arrows().unwrap();
        assert_eq!(up.len(), 1, "{up:?}");
        assert!(!up[0].2.is_empty(), "{up:?}");
        // Cut one way, the loop is gone.
        let (_d, t) = tree(&[
            ("lib.rs", "mod low;\nmod high;\n"),
            ("low.rs", "pub struct L;\n"),
            ("high/mod.rs", "mod a;\n"),
            ("high/a.rs", "use crate::low::L;\n"),
        ]);
        assert!(t.upward_arrows().unwrap().is_empty());
    }

    #[test]
    fn the_workspace_has_no_circle() {
        // The brief's bar: no crate with more than one arrow back up.
        assert!(UPWARD_ALLOWED.iter().all(|(_, n)| *n <= 1));
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        if let Err(e) = check(root) {
            panic!("{e}");
        }
    }
}
