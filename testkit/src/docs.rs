//! The README and `docs/` as the suite checks them: their links, their
//! headings' anchors, and the commands they show. Shared by the tracer's
//! docs test (`commitscope ...` against its CLI) and xtask's (`cargo xtask
//! ...` against its own), so both read the pages the same way.
use std::path::{Path, PathBuf};

/// The workspace's Markdown pages a reader meets: `README.md` and every
/// `docs/*.md`, in a stable order.
pub fn pages(root: &Path) -> Vec<PathBuf> {
    let mut out = vec![root.join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .map(|d| {
            d.flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "md"))
                .collect()
        })
        .unwrap_or_default();
    docs.sort();
    out.extend(docs);
    out
}

/// [`pages`] with their text; panics on a page that cannot be read (the
/// suite's own files).
pub fn read_pages(root: &Path) -> Vec<(PathBuf, String)> {
    pages(root)
        .into_iter()
        .map(|p| {
            let text =
                std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            (p, text)
        })
        .collect()
}

/// One line of a page, for messages: `docs/trace.md:12`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct At {
    pub line: usize,
    pub text: String,
}

/// The targets of every inline Markdown link `[text](target)` outside
/// code, with the line each is on.
pub fn links(text: &str) -> Vec<At> {
    let mut out = Vec::new();
    for (n, line) in prose_lines(text) {
        let mut rest = line;
        while let Some(i) = rest.find("](") {
            let after = &rest[i + 2..];
            let Some(end) = after.find(')') else { break };
            out.push(At {
                line: n,
                text: after[..end].to_string(),
            });
            rest = &after[end..];
        }
    }
    out
}

/// GitHub's anchor for a heading: lower case, spaces to hyphens, every
/// character that is not a letter, digit, `-` or `_` dropped (so
/// "`commitscope trace` — probe" becomes `commitscope-trace--probe`).
pub fn slug(heading: &str) -> String {
    heading
        .trim()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c.to_ascii_lowercase()),
            _ => None,
        })
        .collect()
}

/// The anchors of a page's headings (`#`-style, outside code).
pub fn anchors(text: &str) -> Vec<String> {
    prose_lines(text)
        .filter_map(|(_, l)| {
            let h = l.trim_start_matches('#');
            (h.len() < l.len() && h.starts_with(' ')).then(|| slug(h))
        })
        .collect()
}

/// Lines outside fenced code blocks, numbered from 1.
fn prose_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    let mut fenced = false;
    text.lines().enumerate().filter_map(move |(i, l)| {
        if l.trim_start().starts_with("```") {
            fenced = !fenced;
            return None;
        }
        (!fenced).then_some((i + 1, l))
    })
}

/// Every command line in a page's fenced code blocks that starts with
/// `program` (after an optional `$ ` prompt and `sudo `): continuation
/// lines joined, a trailing `# comment` dropped, and the words split as a
/// shell would (quotes; `$(...)` stands for one word, given as `1`).
/// The words start with `program`'s own.
pub fn commands(text: &str, program: &str) -> Vec<(usize, Vec<String>)> {
    let mut out = Vec::new();
    let mut fenced = false;
    let mut pending: Option<(usize, String)> = None;
    for (i, l) in text.lines().enumerate() {
        if l.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if !fenced {
            continue;
        }
        let line = match pending.take() {
            Some((n, mut acc)) => {
                acc.push(' ');
                acc.push_str(l.trim());
                (n, acc)
            }
            None => {
                let t = l.trim_start();
                let t = t.strip_prefix("$ ").unwrap_or(t);
                let t = t.strip_prefix("sudo ").unwrap_or(t);
                if !(t == program || t.starts_with(&format!("{program} "))) {
                    continue;
                }
                (i + 1, t.to_string())
            }
        };
        let body = strip_comment(&line.1);
        if let Some(cont) = body.trim_end().strip_suffix('\\') {
            pending = Some((line.0, cont.to_string()));
            continue;
        }
        out.push((line.0, split(body)));
    }
    out
}

/// Inline code spans (`` `...` ``) in prose that start with `program `:
/// the shorthand examples in running text, for a check of their flags.
pub fn inline_commands(text: &str, program: &str) -> Vec<At> {
    let mut out = Vec::new();
    for (n, line) in prose_lines(text) {
        for (k, span) in line.split('`').enumerate() {
            let span = span.strip_prefix("sudo ").unwrap_or(span);
            if k % 2 == 1 && span.starts_with(&format!("{program} ")) {
                out.push(At {
                    line: n,
                    text: span.to_string(),
                });
            }
        }
    }
    out
}

/// The long flags (`--name`) among a command's words, without values.
pub fn long_flags(words: &str) -> Vec<String> {
    words
        .split(|c: char| c.is_whitespace() || c == '[' || c == ']' || c == '|')
        .filter_map(|w| w.strip_prefix("--"))
        .map(|w| w.split('=').next().unwrap_or(w).to_string())
        .filter(|w| !w.is_empty() && w.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'))
        .collect()
}

/// A line's text before an unquoted ` #`.
fn strip_comment(line: &str) -> &str {
    let (mut single, mut double) = (false, false);
    let b = line.as_bytes();
    for (i, &c) in b.iter().enumerate() {
        match c {
            b'\'' if !double => single = !single,
            b'"' if !single => double = !double,
            b'#' if !single && !double && (i == 0 || b[i - 1] == b' ') => return &line[..i],
            _ => {}
        }
    }
    line
}

/// Shell words: quotes removed, `$(...)` as `1`.
fn split(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut has = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {
                if has {
                    words.push(std::mem::take(&mut cur));
                    has = false;
                }
            }
            '\'' | '"' => {
                has = true;
                for q in chars.by_ref() {
                    if q == c {
                        break;
                    }
                    cur.push(q);
                }
            }
            '$' if chars.peek() == Some(&'(') => {
                has = true;
                let mut depth = 0;
                for q in chars.by_ref() {
                    match q {
                        '(' => depth += 1,
                        ')' => {
                            depth -= 1;
                            if depth == 0 {
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                cur.push('1');
            }
            c => {
                has = true;
                cur.push(c);
            }
        }
    }
    if has {
        words.push(cur);
    }
    words
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_read_as_a_shell_would() {
        let page = "text `commitscope trace --pid 1` here\n\
                    ```sh\n\
                    $ sudo commitscope trace --pid $(pidof mariadbd)   # a comment\n\
                    commitscope sweep --threads 1,2 \\\n    --out 'a b'\n\
                    other --x\n\
                    ```\n";
        assert_eq!(
            commands(page, "commitscope"),
            vec![
                (
                    3,
                    vec![
                        "commitscope".into(),
                        "trace".into(),
                        "--pid".into(),
                        "1".into()
                    ]
                ),
                (
                    4,
                    ["commitscope", "sweep", "--threads", "1,2", "--out", "a b"]
                        .map(String::from)
                        .to_vec()
                ),
            ]
        );
        assert_eq!(
            inline_commands(page, "commitscope")[0].text,
            "commitscope trace --pid 1"
        );
    }

    #[test]
    fn links_and_anchors_follow_github() {
        assert_eq!(
            slug("`commitscope trace` — probe a running server"),
            "commitscope-trace--probe-a-running-server"
        );
        let page = "# Top\n[a](docs/x.md#probe-tiers) and [b](#top)\n```\n[c](nowhere)\n```\n";
        let l: Vec<String> = links(page).into_iter().map(|a| a.text).collect();
        assert_eq!(l, ["docs/x.md#probe-tiers", "#top"]);
        assert_eq!(anchors(page), ["top"]);
        assert_eq!(long_flags("x --a 1 [--b-c=2] | --d"), ["a", "b-c", "d"]);
    }
}
