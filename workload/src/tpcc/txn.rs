//! The five TPC-C transactions (clause 2.4-2.8) as SQL on one blocking
//! connection, statement for statement as tpcc-mysql issues them, with the
//! specification's updates where tpcc-mysql skips them.
use fastrand::Rng;
use mysql::{prelude::Queryable, Conn, Row, TxOpts};

use super::{
    rand::{last_name, nurand, NuConstants},
    spec::{Kind, CUSTOMERS_PER_DISTRICT, DISTRICTS, ITEMS},
};

/// What one transaction did, when it did not fail.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    /// Commits that wrote something (what the redo log has to make durable).
    pub write_commits: u32,
    /// New-Order's 1 % that ends in a rollback on an unused item.
    pub rolled_back: bool,
}

/// Inputs of one transaction, drawn before the first attempt so that a
/// retry repeats the same transaction.
#[derive(Clone, Debug)]
pub enum Input {
    NewOrder {
        w: u32,
        d: u32,
        c: u32,
        /// (item id, supplying warehouse, quantity), in ol_number order.
        lines: Vec<(u32, u32, u32)>,
    },
    Payment {
        w: u32,
        d: u32,
        c_w: u32,
        c_d: u32,
        customer: Customer,
        /// In cents.
        amount: u32,
    },
    OrderStatus {
        w: u32,
        d: u32,
        customer: Customer,
    },
    Delivery {
        w: u32,
        carrier: u32,
    },
    StockLevel {
        w: u32,
        d: u32,
        threshold: u32,
    },
}

#[derive(Clone, Debug)]
pub enum Customer {
    Id(u32),
    LastName(String),
}

/// Any warehouse but `home` (or `home` when there is only one), as
/// tpcc-mysql's other_ware().
fn other_warehouse(rng: &mut Rng, home: u32, warehouses: u32) -> u32 {
    if warehouses <= 1 {
        return home;
    }
    loop {
        let w = rng.u32(1..=warehouses);
        if w != home {
            return w;
        }
    }
}

fn customer(rng: &mut Rng, k: &NuConstants) -> Customer {
    if rng.u32(1..=100) <= 60 {
        Customer::LastName(last_name(nurand(rng, 255, k.c_last, 0, 999)))
    } else {
        Customer::Id(nurand(rng, 1023, k.c_id, 1, CUSTOMERS_PER_DISTRICT))
    }
}

/// Draws the inputs of a `kind` transaction (clause 2.4.1, 2.5.1, ...).
pub fn draw(kind: Kind, rng: &mut Rng, warehouses: u32, k: &NuConstants) -> Input {
    let w = rng.u32(1..=warehouses);
    let d = rng.u32(1..=DISTRICTS);
    match kind {
        Kind::NewOrder => {
            let n = rng.u32(5..=15);
            let rollback = rng.u32(1..=100) == 1;
            let lines = (0..n)
                .map(|i| {
                    let item = if rollback && i == n - 1 {
                        ITEMS + 1
                    } else {
                        nurand(rng, 8191, k.ol_i_id, 1, ITEMS)
                    };
                    let supply = if rng.u32(1..=100) == 1 {
                        other_warehouse(rng, w, warehouses)
                    } else {
                        w
                    };
                    (item, supply, rng.u32(1..=10))
                })
                .collect();
            Input::NewOrder {
                w,
                d,
                c: nurand(rng, 1023, k.c_id, 1, CUSTOMERS_PER_DISTRICT),
                lines,
            }
        }
        Kind::Payment => {
            let (c_w, c_d) = if rng.u32(1..=100) <= 85 {
                (w, d)
            } else {
                (other_warehouse(rng, w, warehouses), rng.u32(1..=DISTRICTS))
            };
            Input::Payment {
                w,
                d,
                c_w,
                c_d,
                customer: customer(rng, k),
                amount: rng.u32(100..=500_000),
            }
        }
        Kind::OrderStatus => Input::OrderStatus {
            w,
            d,
            customer: customer(rng, k),
        },
        Kind::Delivery => Input::Delivery {
            w,
            carrier: rng.u32(1..=10),
        },
        Kind::StockLevel => Input::StockLevel {
            w,
            d,
            threshold: rng.u32(10..=20),
        },
    }
}

fn cents(v: u32) -> String {
    format!("{}.{:02}", v / 100, v % 100)
}

/// Runs one transaction. Errors are the server's: the caller decides
/// between retry (deadlock, lock wait timeout) and failure. A Delivery
/// that commits each district on its own calls `committed` after each of
/// those commits but its last (which its outcome counts): they are
/// durable when they happen, even if a later district fails.
pub fn run(
    c: &mut Conn,
    input: &Input,
    delivery_single_commit: bool,
    committed: &mut dyn FnMut(),
) -> mysql::Result<Outcome> {
    match input {
        Input::NewOrder {
            w,
            d,
            c: cid,
            lines,
        } => new_order(c, *w, *d, *cid, lines),
        Input::Payment {
            w,
            d,
            c_w,
            c_d,
            customer,
            amount,
        } => payment(c, *w, *d, *c_w, *c_d, customer, *amount),
        Input::OrderStatus { w, d, customer } => order_status(c, *w, *d, customer),
        Input::Delivery { w, carrier } => {
            delivery(c, *w, *carrier, delivery_single_commit, committed)
        }
        Input::StockLevel { w, d, threshold } => stock_level(c, *w, *d, *threshold),
    }
}

fn new_order(
    c: &mut Conn,
    w: u32,
    d: u32,
    cid: u32,
    lines: &[(u32, u32, u32)],
) -> mysql::Result<Outcome> {
    let mut tx = c.start_transaction(TxOpts::default())?;
    let _: Option<Row> = tx.exec_first(
        "SELECT c_discount, c_last, c_credit, w_tax FROM customer, warehouse \
         WHERE w_id = ? AND c_w_id = w_id AND c_d_id = ? AND c_id = ?",
        (w, d, cid),
    )?;
    let next: Option<(u32, String)> = tx.exec_first(
        "SELECT d_next_o_id, d_tax FROM district WHERE d_id = ? AND d_w_id = ? FOR UPDATE",
        (d, w),
    )?;
    let o_id = next.map(|(n, _)| n).unwrap_or(0);
    tx.exec_drop(
        "UPDATE district SET d_next_o_id = ? + 1 WHERE d_id = ? AND d_w_id = ?",
        (o_id, d, w),
    )?;
    let all_local = lines.iter().all(|&(_, s, _)| s == w) as u32;
    tx.exec_drop(
        "INSERT INTO orders (o_id, o_d_id, o_w_id, o_c_id, o_entry_d, o_ol_cnt, o_all_local) \
         VALUES (?, ?, ?, ?, NOW(), ?, ?)",
        (o_id, d, w, cid, lines.len() as u32, all_local),
    )?;
    tx.exec_drop(
        "INSERT INTO new_orders (no_o_id, no_d_id, no_w_id) VALUES (?, ?, ?)",
        (o_id, d, w),
    )?;
    // Stock rows are locked in (warehouse, item) order, as tpcc-mysql
    // sorts them, so two New-Orders cannot deadlock on each other's stock.
    let mut order: Vec<usize> = (0..lines.len()).collect();
    order.sort_by_key(|&i| (lines[i].1, lines[i].0));
    let dist_col = format!("s_dist_{d:02}");
    for i in order {
        let (item, supply, qty) = lines[i];
        let found: Option<(String, String, String)> = tx.exec_first(
            "SELECT i_price, i_name, i_data FROM item WHERE i_id = ?",
            (item,),
        )?;
        let Some((price, _, _)) = found else {
            // The unused item id: the whole order is rolled back.
            tx.rollback()?;
            return Ok(Outcome {
                write_commits: 0,
                rolled_back: true,
            });
        };
        let s: Option<(i32, String, String)> = tx.exec_first(
            format!(
                "SELECT s_quantity, s_data, {dist_col} FROM stock WHERE s_i_id = ? AND s_w_id = ? FOR UPDATE"
            ),
            (item, supply),
        )?;
        let (s_qty, _, dist) = s.unwrap_or((0, String::new(), String::new()));
        let qty_i = qty as i32;
        let new_qty = if s_qty >= qty_i + 10 {
            s_qty - qty_i
        } else {
            s_qty - qty_i + 91
        };
        tx.exec_drop(
            "UPDATE stock SET s_quantity = ?, s_ytd = s_ytd + ?, s_order_cnt = s_order_cnt + 1, \
             s_remote_cnt = s_remote_cnt + ? WHERE s_i_id = ? AND s_w_id = ?",
            (new_qty, qty, (supply != w) as u32, item, supply),
        )?;
        tx.exec_drop(
            "INSERT INTO order_line (ol_o_id, ol_d_id, ol_w_id, ol_number, ol_i_id, ol_supply_w_id, \
             ol_quantity, ol_amount, ol_dist_info) VALUES (?, ?, ?, ?, ?, ?, ?, ? * ?, ?)",
            (o_id, d, w, i as u32 + 1, item, supply, qty, qty, price, dist),
        )?;
    }
    tx.commit()?;
    Ok(Outcome {
        write_commits: 1,
        rolled_back: false,
    })
}

/// The customer id of a by-last-name lookup: the one at position
/// ceil(n/2) among those with that name, ordered by first name.
fn by_last_name(
    tx: &mut mysql::Transaction,
    w: u32,
    d: u32,
    last: &str,
) -> mysql::Result<Option<u32>> {
    let ids: Vec<u32> = tx.exec(
        "SELECT c_id FROM customer WHERE c_w_id = ? AND c_d_id = ? AND c_last = ? ORDER BY c_first",
        (w, d, last),
    )?;
    Ok(ids.get(ids.len().div_ceil(2).saturating_sub(1)).copied())
}

fn payment(
    c: &mut Conn,
    w: u32,
    d: u32,
    c_w: u32,
    c_d: u32,
    customer: &Customer,
    amount: u32,
) -> mysql::Result<Outcome> {
    let amt = cents(amount);
    let mut tx = c.start_transaction(TxOpts::default())?;
    tx.exec_drop(
        "UPDATE warehouse SET w_ytd = w_ytd + ? WHERE w_id = ?",
        (&amt, w),
    )?;
    // The spec's full rows are read, as a terminal would show them; only
    // the names are used (H_DATA).
    let w_row: Option<Row> = tx.exec_first(
        "SELECT w_street_1, w_street_2, w_city, w_state, w_zip, w_name FROM warehouse WHERE w_id = ?",
        (w,),
    )?;
    let w_name: Option<String> = w_row.and_then(|r| r.get(5));
    tx.exec_drop(
        "UPDATE district SET d_ytd = d_ytd + ? WHERE d_w_id = ? AND d_id = ?",
        (&amt, w, d),
    )?;
    let d_row: Option<Row> = tx.exec_first(
        "SELECT d_street_1, d_street_2, d_city, d_state, d_zip, d_name FROM district \
         WHERE d_w_id = ? AND d_id = ?",
        (w, d),
    )?;
    let d_name: Option<String> = d_row.and_then(|r| r.get(5));
    let cid = match customer {
        Customer::Id(id) => Some(*id),
        Customer::LastName(last) => by_last_name(&mut tx, c_w, c_d, last)?,
    };
    let Some(cid) = cid else {
        tx.rollback()?;
        return Ok(Outcome::default());
    };
    let c_row: Option<Row> = tx.exec_first(
        "SELECT c_first, c_middle, c_last, c_street_1, c_street_2, c_city, c_state, c_zip, \
         c_phone, c_credit, c_credit_lim, c_discount, c_balance, c_since FROM customer \
         WHERE c_w_id = ? AND c_d_id = ? AND c_id = ? FOR UPDATE",
        (c_w, c_d, cid),
    )?;
    let credit: Option<String> = c_row.and_then(|r| r.get(9));
    if credit.as_deref() == Some("BC") {
        // Clause 2.5.2.2: the payment's ids and amount in front of C_DATA,
        // kept to 500 characters.
        tx.exec_drop(
            "UPDATE customer SET c_balance = c_balance - ?, c_ytd_payment = c_ytd_payment + ?, \
             c_payment_cnt = c_payment_cnt + 1, \
             c_data = LEFT(CONCAT(?, ' ', ?, ' ', ?, ' ', ?, ' ', ?, ' ', ?, ' | ', c_data), 500) \
             WHERE c_w_id = ? AND c_d_id = ? AND c_id = ?",
            (&amt, &amt, cid, c_d, c_w, d, w, &amt, c_w, c_d, cid),
        )?;
    } else {
        tx.exec_drop(
            "UPDATE customer SET c_balance = c_balance - ?, c_ytd_payment = c_ytd_payment + ?, \
             c_payment_cnt = c_payment_cnt + 1 WHERE c_w_id = ? AND c_d_id = ? AND c_id = ?",
            (&amt, &amt, c_w, c_d, cid),
        )?;
    }
    let h_data = format!(
        "{}    {}",
        w_name.unwrap_or_default(),
        d_name.unwrap_or_default()
    );
    tx.exec_drop(
        "INSERT INTO history (h_c_d_id, h_c_w_id, h_c_id, h_d_id, h_w_id, h_date, h_amount, h_data) \
         VALUES (?, ?, ?, ?, ?, NOW(), ?, ?)",
        (c_d, c_w, cid, d, w, &amt, h_data),
    )?;
    tx.commit()?;
    Ok(Outcome {
        write_commits: 1,
        rolled_back: false,
    })
}

fn order_status(c: &mut Conn, w: u32, d: u32, customer: &Customer) -> mysql::Result<Outcome> {
    let mut tx = c.start_transaction(TxOpts::default())?;
    let cid = match customer {
        Customer::Id(id) => Some(*id),
        Customer::LastName(last) => by_last_name(&mut tx, w, d, last)?,
    };
    if let Some(cid) = cid {
        let _: Option<Row> = tx.exec_first(
            "SELECT c_balance, c_first, c_middle, c_last FROM customer \
             WHERE c_w_id = ? AND c_d_id = ? AND c_id = ?",
            (w, d, cid),
        )?;
        // A Row, not a tuple: o_entry_d arrives as a date value, which
        // the tuple conversion would refuse (with a panic).
        let last: Option<Row> = tx.exec_first(
            "SELECT o_id, o_entry_d, o_carrier_id FROM orders \
             WHERE o_w_id = ? AND o_d_id = ? AND o_c_id = ? ORDER BY o_id DESC LIMIT 1",
            (w, d, cid),
        )?;
        let last: Option<u32> = last.and_then(|r| r.get(0));
        if let Some(o) = last {
            let _: Vec<Row> = tx.exec(
                "SELECT ol_i_id, ol_supply_w_id, ol_quantity, ol_amount, ol_delivery_d FROM order_line \
                 WHERE ol_w_id = ? AND ol_d_id = ? AND ol_o_id = ?",
                (w, d, o),
            )?;
        }
    }
    tx.commit()?;
    Ok(Outcome::default())
}

/// Delivers the oldest undelivered order of each district. The oldest
/// new_orders row is read with a locking read and its DELETE must remove
/// it: two concurrent Deliveries of a warehouse can never both deliver the
/// same order (tpcc-mysql's plain MIN() read can).
fn delivery(
    c: &mut Conn,
    w: u32,
    carrier: u32,
    single_commit: bool,
    committed: &mut dyn FnMut(),
) -> mysql::Result<Outcome> {
    let mut tx = c.start_transaction(TxOpts::default())?;
    let mut pending = false;
    for d in 1..=DISTRICTS {
        let oldest: Option<u32> = tx.exec_first(
            "SELECT no_o_id FROM new_orders WHERE no_d_id = ? AND no_w_id = ? \
             ORDER BY no_o_id LIMIT 1 FOR UPDATE",
            (d, w),
        )?;
        if let Some(o) = oldest {
            tx.exec_drop(
                "DELETE FROM new_orders WHERE no_o_id = ? AND no_d_id = ? AND no_w_id = ?",
                (o, d, w),
            )?;
            if tx.affected_rows() == 1 {
                let cid: Option<u32> = tx.exec_first(
                    "SELECT o_c_id FROM orders WHERE o_id = ? AND o_d_id = ? AND o_w_id = ?",
                    (o, d, w),
                )?;
                tx.exec_drop(
                    "UPDATE orders SET o_carrier_id = ? WHERE o_id = ? AND o_d_id = ? AND o_w_id = ?",
                    (carrier, o, d, w),
                )?;
                tx.exec_drop(
                    "UPDATE order_line SET ol_delivery_d = NOW() WHERE ol_o_id = ? AND ol_d_id = ? AND ol_w_id = ?",
                    (o, d, w),
                )?;
                let total: Option<Option<String>> = tx.exec_first(
                    "SELECT SUM(ol_amount) FROM order_line WHERE ol_o_id = ? AND ol_d_id = ? AND ol_w_id = ?",
                    (o, d, w),
                )?;
                let total = total.flatten().unwrap_or_else(|| "0".into());
                tx.exec_drop(
                    "UPDATE customer SET c_balance = c_balance + ?, c_delivery_cnt = c_delivery_cnt + 1 \
                     WHERE c_id = ? AND c_d_id = ? AND c_w_id = ?",
                    (total, cid.unwrap_or(0), d, w),
                )?;
                pending = true;
            }
        }
        if !single_commit && d < DISTRICTS {
            // tpcc-mysql commits each district on its own.
            tx.commit()?;
            if pending {
                committed();
            }
            pending = false;
            tx = c.start_transaction(TxOpts::default())?;
        }
    }
    tx.commit()?;
    Ok(Outcome {
        write_commits: pending as u32,
        rolled_back: false,
    })
}

fn stock_level(c: &mut Conn, w: u32, d: u32, threshold: u32) -> mysql::Result<Outcome> {
    let mut tx = c.start_transaction(TxOpts::default())?;
    let next: Option<u32> = tx.exec_first(
        "SELECT d_next_o_id FROM district WHERE d_w_id = ? AND d_id = ?",
        (w, d),
    )?;
    let next = next.unwrap_or(0);
    let _: Option<u64> = tx.exec_first(
        "SELECT COUNT(DISTINCT s_i_id) FROM order_line, stock WHERE ol_w_id = ? AND ol_d_id = ? \
         AND ol_o_id < ? AND ol_o_id >= ? AND s_w_id = ? AND s_i_id = ol_i_id AND s_quantity < ?",
        (w, d, next, next.saturating_sub(20), w, threshold),
    )?;
    tx.commit()?;
    Ok(Outcome::default())
}
