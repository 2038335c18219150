//! TPC-C consistency conditions 1-4 (clause 3.3.2), each one SQL query
//! that returns the districts or warehouses that break it.
use mysql::{prelude::Queryable, Conn};

use super::schema::sql;
use crate::error::Result;

/// One condition and how many rows broke it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Condition {
    pub number: u8,
    pub what: &'static str,
    /// Warehouses (condition 1) or districts (2-4) checked.
    pub checked: u64,
    /// Those that break it, with a few examples.
    pub violations: u64,
    pub examples: Vec<String>,
}

impl Condition {
    pub fn holds(&self) -> bool {
        self.violations == 0
    }
}

const CONDITIONS: [(u8, &str, &str, &str); 4] = [
    (
        1,
        "W_YTD = sum(D_YTD)",
        "SELECT COUNT(*) FROM warehouse",
        "SELECT w_id, w_ytd, s FROM warehouse JOIN (SELECT d_w_id, SUM(d_ytd) AS s FROM district GROUP BY d_w_id) d \
         ON d.d_w_id = w_id WHERE w_ytd <> s",
    ),
    (
        2,
        "D_NEXT_O_ID - 1 = max(O_ID) = max(NO_O_ID)",
        "SELECT COUNT(*) FROM district",
        "SELECT d_w_id, d_id, d_next_o_id, mo, mno FROM district \
         JOIN (SELECT o_w_id, o_d_id, MAX(o_id) AS mo FROM orders GROUP BY o_w_id, o_d_id) o \
           ON o.o_w_id = d_w_id AND o.o_d_id = d_id \
         LEFT JOIN (SELECT no_w_id, no_d_id, MAX(no_o_id) AS mno FROM new_orders GROUP BY no_w_id, no_d_id) n \
           ON n.no_w_id = d_w_id AND n.no_d_id = d_id \
         WHERE d_next_o_id - 1 <> mo OR (mno IS NOT NULL AND mno <> mo)",
    ),
    (
        3,
        "max(NO_O_ID) - min(NO_O_ID) + 1 = count(NEW-ORDER rows)",
        "SELECT COUNT(DISTINCT no_w_id, no_d_id) FROM new_orders",
        "SELECT no_w_id, no_d_id, MAX(no_o_id), MIN(no_o_id), COUNT(*) FROM new_orders \
         GROUP BY no_w_id, no_d_id HAVING MAX(no_o_id) - MIN(no_o_id) + 1 <> COUNT(*)",
    ),
    (
        4,
        "sum(O_OL_CNT) = count(ORDER-LINE rows)",
        "SELECT COUNT(*) FROM district",
        "SELECT o_w_id, o_d_id, s, n FROM \
         (SELECT o_w_id, o_d_id, SUM(o_ol_cnt) AS s FROM orders GROUP BY o_w_id, o_d_id) o \
         JOIN (SELECT ol_w_id, ol_d_id, COUNT(*) AS n FROM order_line GROUP BY ol_w_id, ol_d_id) l \
           ON l.ol_w_id = o_w_id AND l.ol_d_id = o_d_id WHERE s <> n",
    ),
];

/// Runs the four checks on the database `c` is using.
pub fn run(c: &mut Conn) -> Result<Vec<Condition>> {
    let mut out = Vec::new();
    for (number, what, count_sql, bad_sql) in CONDITIONS {
        let checked: Option<u64> = c
            .query_first(count_sql)
            .map_err(sql("checking consistency"))?;
        let bad: Vec<mysql::Row> = c.query(bad_sql).map_err(sql("checking consistency"))?;
        let examples = bad
            .iter()
            .take(3)
            .map(|r| {
                (0..r.len())
                    .map(|i| r.as_ref(i).map(|v| v.as_sql(true)).unwrap_or_default())
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect();
        out.push(Condition {
            number,
            what,
            checked: checked.unwrap_or(0),
            violations: bad.len() as u64,
            examples,
        });
    }
    Ok(out)
}

/// One line per condition: `1 OK  W_YTD = sum(D_YTD)  (2 warehouses)`.
pub fn render(conds: &[Condition]) -> String {
    conds
        .iter()
        .map(|c| {
            let unit = if c.number == 1 {
                "warehouses"
            } else {
                "districts"
            };
            if c.holds() {
                format!(
                    "  condition {} OK   {}  ({} {unit})\n",
                    c.number, c.what, c.checked
                )
            } else {
                format!(
                    "  condition {} FAIL {}  ({} of {} {unit}; e.g. {})\n",
                    c.number,
                    c.what,
                    c.violations,
                    c.checked,
                    c.examples.join("; ")
                )
            }
        })
        .collect()
}
