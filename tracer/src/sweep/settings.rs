//! Server settings between cells: which options are dynamic (asked of the
//! server itself), applying them with `SET GLOBAL`, the dry validation of
//! every value, and putting an existing server back as it was.
use mysql_async::{prelude::Queryable, Conn};
use readers::server::options::{OptionAxis, ServerOption};

use crate::{
    error::{Error, Result},
    sweep::plan::Change,
};

/// How each axis changes, and its value before the sweep touched it.
pub struct Classified {
    pub change: Vec<Change>,
    /// `@@GLOBAL` before the first `SET GLOBAL` (dynamic ones only; None
    /// also for a NULL value, which there is no setting back to).
    pub originals: Vec<Option<ServerOption>>,
}

fn server_error(e: &mysql_async::Error) -> Option<(u16, String)> {
    match e {
        mysql_async::Error::Server(s) => Some((s.code, s.message.clone())),
        _ => None,
    }
}

/// Asks the server: a variable that takes `SET GLOBAL v = @@GLOBAL.v` is
/// dynamic; a read-only one, or an option that is no variable at all (the
/// server accepted it at startup), needs a restart.
pub async fn classify(conn: &mut Conn, axes: &[OptionAxis]) -> Result<Classified> {
    let mut change = Vec::new();
    let mut originals = Vec::new();
    for a in axes {
        let var = a.option(0).variable();
        if var == crate::server::replica::DELAY_AXIS {
            change.push(Change::Replica);
            originals.push(None);
            continue;
        }
        // The text protocol: every value comes back as its string form.
        let current: std::result::Result<Option<Option<String>>, _> =
            conn.query_first(format!("SELECT @@GLOBAL.{var}")).await;
        let Ok(current) = current else {
            change.push(Change::Restart);
            originals.push(None);
            continue;
        };
        match conn
            .query_drop(format!("SET GLOBAL {var} = @@GLOBAL.{var}"))
            .await
        {
            Ok(()) => {
                change.push(Change::Dynamic);
                originals.push(current.flatten().map(|value| ServerOption {
                    key: var.clone(),
                    value,
                }));
            }
            // 1238 "is a read only variable", typically; whatever the
            // server's reason, the value has to come in at startup.
            Err(e) if server_error(&e).is_some() => {
                change.push(Change::Restart);
                originals.push(None);
            }
            Err(e) => return Err(Error::Runtime(format!("SET GLOBAL {var}: {e}"))),
        }
    }
    Ok(Classified { change, originals })
}

/// `SET GLOBAL`; the server's error or warning (an out-of-range value is
/// only a warning, then clamped) comes back as `Err(text)`.
pub async fn apply(conn: &mut Conn, o: &ServerOption) -> Result<std::result::Result<(), String>> {
    let sql = format!("SET GLOBAL {} = {}", o.variable(), o.sql_value());
    match conn.query_drop(&sql).await {
        Ok(()) => {}
        Err(e) => {
            return match server_error(&e) {
                Some((code, msg)) => Ok(Err(format!("ERROR {code}: {msg}"))),
                None => Err(Error::Runtime(format!("{sql}: {e}"))),
            }
        }
    }
    // The OK packet's count: SHOW WARNINGS alone would also list an older
    // statement's notes (a SET that raises none does not clear them).
    if conn.get_warnings() == 0 {
        return Ok(Ok(()));
    }
    let warnings: Vec<mysql_async::Row> = conn
        .query("SHOW WARNINGS")
        .await
        .map_err(|e| Error::Runtime(format!("SHOW WARNINGS: {e}")))?;
    let text = |w: &mysql_async::Row, i: usize| -> String {
        w.get_opt::<String, _>(i)
            .and_then(|r| r.ok())
            .unwrap_or_default()
    };
    Ok(Err(warnings
        .first()
        .map(|w| format!("{} {}: {}", text(w, 0), text(w, 1), text(w, 2)))
        .unwrap_or_else(|| {
            format!("{} warnings", conn.get_warnings())
        })))
}

/// Puts a variable back to a value read from `@@GLOBAL`.
pub async fn restore(conn: &mut Conn, o: &ServerOption) -> Result<()> {
    let sql = format!("SET GLOBAL {} = {}", o.variable(), o.sql_value());
    conn.query_drop(&sql)
        .await
        .map_err(|e| Error::Runtime(format!("{sql}: {e}")))
}

/// Tries every value of every dynamic axis, then puts each back. Returns
/// the first rejected (axis, value index, the server's words).
pub async fn validate_dynamic(
    conn: &mut Conn,
    axes: &[OptionAxis],
    c: &Classified,
) -> Result<Option<(usize, usize, String)>> {
    for (ai, a) in axes.iter().enumerate() {
        if c.change[ai] != Change::Dynamic {
            continue;
        }
        let mut bad = None;
        for vi in 0..a.values.len() {
            if let Err(msg) = apply(conn, &a.option(vi)).await? {
                bad = Some((ai, vi, msg));
                break;
            }
        }
        if let Some(orig) = &c.originals[ai] {
            restore(conn, orig).await?;
        }
        if bad.is_some() {
            return Ok(bad);
        }
    }
    Ok(None)
}
