//! The TPC-C rows (clause 4.3.3.1), one table at a time, written field by
//! field to an [`Out`]: the same generator feeds a multi-row `INSERT` or a
//! `LOAD DATA LOCAL INFILE` stream. Each part is generated from its own
//! seed, so a part that must be sent again (a deadlock) is the same rows.
use std::io;

use fastrand::Rng;

use super::{
    rand::{self as tr, NuConstants},
    spec::{CUSTOMERS_PER_DISTRICT, DISTRICTS, ITEMS, NEW_ORDER_FIRST},
};

/// Where one table's rows go: the fields of a row in column order, then
/// [`Out::end`]. Strings are letters and digits only: nothing to escape.
pub trait Out {
    fn int(&mut self, v: u64);
    /// A decimal, already formatted.
    fn num(&mut self, v: &str);
    fn text(&mut self, v: &str);
    fn null(&mut self);
    /// The load's timestamp.
    fn now(&mut self);
    /// Ends the row (and may send a batch, or stop the load).
    fn end(&mut self) -> io::Result<()>;
}

/// A row's text being built: one method per kind of field, then `close`.
pub trait Fields {
    fn int(&mut self, v: u64);
    fn num(&mut self, v: &str);
    fn text(&mut self, v: &str);
    fn null(&mut self);
    fn now(&mut self);
    fn close(&mut self);
}

/// A sender of rows: where the text goes once a row is closed (a batch
/// sent as an INSERT, a buffer streamed to LOAD DATA).
pub trait Sender {
    type Rows: Fields;
    fn rows(&mut self) -> &mut Self::Rows;
    /// After each row: send what is due.
    fn row_done(&mut self) -> io::Result<()>;
}

impl<S: Sender> Out for S {
    fn int(&mut self, v: u64) {
        self.rows().int(v);
    }
    fn num(&mut self, v: &str) {
        self.rows().num(v);
    }
    fn text(&mut self, v: &str) {
        self.rows().text(v);
    }
    fn null(&mut self) {
        self.rows().null();
    }
    fn now(&mut self) {
        self.rows().now();
    }
    fn end(&mut self) -> io::Result<()> {
        self.rows().close();
        self.row_done()
    }
}

/// One table's share of a unit of work.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part {
    Items,
    Warehouse(u32),
    District(u32),
    Stock(u32),
    Customer(u32),
    History(u32),
    Orders(u32),
    OrderLine(u32),
    NewOrders(u32),
}

impl Part {
    pub fn table(self) -> &'static str {
        match self {
            Part::Items => "item",
            Part::Warehouse(_) => "warehouse",
            Part::District(_) => "district",
            Part::Stock(_) => "stock",
            Part::Customer(_) => "customer",
            Part::History(_) => "history",
            Part::Orders(_) => "orders",
            Part::OrderLine(_) => "order_line",
            Part::NewOrders(_) => "new_orders",
        }
    }

    /// Rows per INSERT statement: wide rows (customer, stock: ~300-650
    /// bytes) in smaller batches.
    pub fn batch(self) -> usize {
        match self {
            Part::Stock(_) | Part::Customer(_) => 500,
            _ => 1000,
        }
    }

    /// Writes the part's rows. `seed` fixes them; for the orders tables it
    /// must be the warehouse's orders seed (both tables agree on each
    /// order's line count and delivery).
    pub fn write(self, o: &mut dyn Out, seed: u64, k: &NuConstants) -> io::Result<()> {
        let mut g = Gen {
            rng: Rng::with_seed(seed),
            s: String::with_capacity(512),
        };
        match self {
            Part::Items => g.items(o),
            Part::Warehouse(w) => g.warehouse(o, w),
            Part::District(w) => g.districts(o, w),
            Part::Stock(w) => g.stock(o, w),
            Part::Customer(w) => g.customers(o, w, k),
            Part::History(w) => g.history(o, w),
            Part::Orders(w) => g.orders(o, w, seed),
            Part::OrderLine(w) => g.order_lines(o, w, seed),
            Part::NewOrders(w) => g.new_orders(o, w),
        }
    }
}

/// A district's orders: o_c_id (a permutation of the customers) and each
/// order's line count, drawn from the orders seed so that `orders` and
/// `order_line` agree without holding either table.
fn district_orders(seed: u64, d: u32) -> (Vec<u32>, Vec<u8>) {
    let mut rng = Rng::with_seed(seed ^ (u64::from(d) << 32));
    let mut perm: Vec<u32> = (1..=CUSTOMERS_PER_DISTRICT).collect();
    rng.shuffle(&mut perm);
    let cnt = (0..CUSTOMERS_PER_DISTRICT)
        .map(|_| rng.u8(5..=15))
        .collect();
    (perm, cnt)
}

struct Gen {
    rng: Rng,
    /// Scratch for one string field.
    s: String,
}

impl Gen {
    fn a(&mut self, o: &mut dyn Out, min: usize, max: usize) {
        self.s.clear();
        tr::astring(&mut self.rng, min, max, &mut self.s);
        o.text(&self.s);
    }

    fn fixed(&mut self, o: &mut dyn Out, lo: u32, hi: u32, scale: u32) {
        o.num(&tr::fixed(&mut self.rng, lo, hi, scale));
    }

    fn address(&mut self, o: &mut dyn Out) {
        for _ in 0..3 {
            self.a(o, 10, 20);
        }
        self.s.clear();
        tr::state(&mut self.rng, &mut self.s);
        o.text(&self.s);
        self.s.clear();
        tr::zip(&mut self.rng, &mut self.s);
        o.text(&self.s);
    }

    fn data(&mut self, o: &mut dyn Out) {
        self.s.clear();
        tr::data_with_original(&mut self.rng, &mut self.s);
        o.text(&self.s);
    }

    fn items(&mut self, o: &mut dyn Out) -> io::Result<()> {
        for i in 1..=ITEMS {
            o.int(i.into());
            o.int(self.rng.u32(1..=10_000).into());
            self.a(o, 14, 24);
            self.fixed(o, 100, 10_000, 2);
            self.data(o);
            o.end()?;
        }
        Ok(())
    }

    fn warehouse(&mut self, o: &mut dyn Out, w: u32) -> io::Result<()> {
        o.int(w.into());
        self.a(o, 6, 10);
        self.address(o);
        self.fixed(o, 0, 20, 2);
        o.num("300000.00");
        o.end()
    }

    fn districts(&mut self, o: &mut dyn Out, w: u32) -> io::Result<()> {
        for d in 1..=DISTRICTS {
            o.int(d.into());
            o.int(w.into());
            self.a(o, 6, 10);
            self.address(o);
            self.fixed(o, 0, 20, 2);
            o.num("30000.00");
            o.int((NEW_ORDER_FIRST + 900).into());
            o.end()?;
        }
        Ok(())
    }

    fn stock(&mut self, o: &mut dyn Out, w: u32) -> io::Result<()> {
        for i in 1..=ITEMS {
            o.int(i.into());
            o.int(w.into());
            o.int(self.rng.u32(10..=100).into());
            for _ in 0..10 {
                self.a(o, 24, 24);
            }
            o.int(0);
            o.int(0);
            o.int(0);
            self.data(o);
            o.end()?;
        }
        Ok(())
    }

    fn customers(&mut self, o: &mut dyn Out, w: u32, k: &NuConstants) -> io::Result<()> {
        for d in 1..=DISTRICTS {
            for c in 1..=CUSTOMERS_PER_DISTRICT {
                let last = if c <= 1000 {
                    tr::last_name(c - 1)
                } else {
                    tr::last_name(tr::nurand(&mut self.rng, 255, k.c_last, 0, 999))
                };
                o.int(c.into());
                o.int(d.into());
                o.int(w.into());
                self.a(o, 8, 16);
                o.text("OE");
                o.text(&last);
                self.address(o);
                self.s.clear();
                tr::nstring(&mut self.rng, 16, 16, &mut self.s);
                o.text(&self.s);
                o.now();
                o.text(if self.rng.u32(1..=100) <= 10 {
                    "BC"
                } else {
                    "GC"
                });
                o.int(50_000);
                self.fixed(o, 0, 50, 2);
                o.num("-10.00");
                o.num("10.00");
                o.int(1);
                o.int(0);
                self.a(o, 300, 500);
                o.end()?;
            }
        }
        Ok(())
    }

    fn history(&mut self, o: &mut dyn Out, w: u32) -> io::Result<()> {
        for d in 1..=DISTRICTS {
            for c in 1..=CUSTOMERS_PER_DISTRICT {
                for v in [c, d, w, d, w] {
                    o.int(v.into());
                }
                o.now();
                o.num("10.00");
                self.a(o, 12, 24);
                o.end()?;
            }
        }
        Ok(())
    }

    fn orders(&mut self, o: &mut dyn Out, w: u32, seed: u64) -> io::Result<()> {
        for d in 1..=DISTRICTS {
            let (perm, cnt) = district_orders(seed, d);
            for (i, (c, n)) in perm.iter().zip(&cnt).enumerate() {
                let id = i as u32 + 1;
                for v in [id, d, w, *c] {
                    o.int(v.into());
                }
                o.now();
                if id < NEW_ORDER_FIRST {
                    o.int(self.rng.u32(1..=10).into());
                } else {
                    o.null();
                }
                o.int((*n).into());
                o.int(1);
                o.end()?;
            }
        }
        Ok(())
    }

    fn order_lines(&mut self, o: &mut dyn Out, w: u32, seed: u64) -> io::Result<()> {
        for d in 1..=DISTRICTS {
            let (_, cnt) = district_orders(seed, d);
            for (i, n) in cnt.iter().enumerate() {
                let id = i as u32 + 1;
                let delivered = id < NEW_ORDER_FIRST;
                for line in 1..=u32::from(*n) {
                    for v in [id, d, w, line, self.rng.u32(1..=ITEMS), w] {
                        o.int(v.into());
                    }
                    if delivered {
                        o.now();
                    } else {
                        o.null();
                    }
                    o.int(5);
                    if delivered {
                        o.num("0.00");
                    } else {
                        self.fixed(o, 1, 999_999, 2);
                    }
                    self.a(o, 24, 24);
                    o.end()?;
                }
            }
        }
        Ok(())
    }

    fn new_orders(&mut self, o: &mut dyn Out, w: u32) -> io::Result<()> {
        for d in 1..=DISTRICTS {
            for id in NEW_ORDER_FIRST..=CUSTOMERS_PER_DISTRICT {
                for v in [id, d, w] {
                    o.int(v.into());
                }
                o.end()?;
            }
        }
        Ok(())
    }
}

/// Rows as `(1,'a',NULL),(2,...)`: the VALUES of a multi-row INSERT.
#[derive(Default)]
pub struct SqlRows {
    pub text: String,
    pub rows: usize,
    in_row: bool,
}

impl SqlRows {
    /// Before a field: opens the row on its first field.
    fn sep(&mut self) {
        if self.in_row {
            self.text.push(',');
        } else {
            if self.rows > 0 {
                self.text.push(',');
            }
            self.text.push('(');
            self.in_row = true;
        }
    }

    pub fn clear(&mut self) {
        self.text.clear();
        self.rows = 0;
        self.in_row = false;
    }
}

impl Fields for SqlRows {
    fn int(&mut self, v: u64) {
        use std::fmt::Write as _;
        self.sep();
        let _ = write!(self.text, "{v}");
    }
    fn num(&mut self, v: &str) {
        self.sep();
        self.text.push_str(v);
    }
    fn text(&mut self, v: &str) {
        self.sep();
        self.text.push('\'');
        self.text.push_str(v);
        self.text.push('\'');
    }
    fn null(&mut self) {
        self.sep();
        self.text.push_str("NULL");
    }
    fn now(&mut self) {
        self.sep();
        self.text.push_str("NOW()");
    }
    fn close(&mut self) {
        self.text.push(')');
        self.rows += 1;
        self.in_row = false;
    }
}

/// Rows as LOAD DATA's default format: tab-separated fields, `\N` for
/// NULL, one row per line.
pub struct TsvRows<'a> {
    pub buf: Vec<u8>,
    pub rows: u64,
    /// The load's timestamp, `YYYY-MM-DD hh:mm:ss`.
    now: &'a str,
    first: bool,
}

impl<'a> TsvRows<'a> {
    pub fn new(now: &'a str) -> Self {
        TsvRows {
            buf: Vec::with_capacity(64 << 10),
            rows: 0,
            now,
            first: true,
        }
    }

    fn sep(&mut self) {
        if self.first {
            self.first = false;
        } else {
            self.buf.push(b'\t');
        }
    }
}

impl Fields for TsvRows<'_> {
    fn int(&mut self, v: u64) {
        use std::io::Write as _;
        self.sep();
        let _ = write!(self.buf, "{v}");
    }
    fn num(&mut self, v: &str) {
        self.sep();
        self.buf.extend_from_slice(v.as_bytes());
    }
    fn text(&mut self, v: &str) {
        self.num(v);
    }
    fn null(&mut self) {
        self.sep();
        self.buf.extend_from_slice(b"\\N");
    }
    fn now(&mut self) {
        let n = self.now;
        self.num(n);
    }
    fn close(&mut self) {
        self.buf.push(b'\n');
        self.rows += 1;
        self.first = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sql_and_tsv_spell_the_same_row() {
        let mut q = SqlRows::default();
        for _ in 0..2 {
            q.int(1);
            q.text("ab");
            q.null();
            q.now();
            q.close();
        }
        assert_eq!(q.text, "(1,'ab',NULL,NOW()),(1,'ab',NULL,NOW())");
        let mut t = TsvRows::new("2026-12-01 00:00:00");
        t.int(1);
        t.text("ab");
        t.null();
        t.now();
        t.close();
        assert_eq!(t.buf, b"1\tab\t\\N\t2026-12-01 00:00:00\n");
    }

    /// Counts rows and keeps the first one's fields.
    #[derive(Default)]
    struct Count {
        rows: u64,
        fields: usize,
        first: Vec<String>,
    }

    impl Out for Count {
        fn int(&mut self, v: u64) {
            self.text(&v.to_string());
        }
        fn num(&mut self, v: &str) {
            self.text(v);
        }
        fn text(&mut self, v: &str) {
            self.fields += 1;
            if self.rows == 0 {
                self.first.push(v.to_string());
            }
        }
        fn null(&mut self) {
            self.text("NULL");
        }
        fn now(&mut self) {
            self.text("NOW");
        }
        fn end(&mut self) -> io::Result<()> {
            self.rows += 1;
            Ok(())
        }
    }

    fn count(p: Part, seed: u64) -> Count {
        let k = NuConstants {
            c_last: 1,
            c_id: 2,
            ol_i_id: 3,
        };
        let mut c = Count::default();
        p.write(&mut c, seed, &k).unwrap();
        c
    }

    #[test]
    fn each_part_has_the_specs_rows_and_columns() {
        for (p, rows, cols) in [
            (Part::Items, 100_000, 5),
            (Part::Warehouse(2), 1, 9),
            (Part::District(2), 10, 11),
            (Part::Stock(2), 100_000, 17),
            (Part::Customer(2), 30_000, 21),
            (Part::History(2), 30_000, 8),
            (Part::Orders(2), 30_000, 8),
            (Part::NewOrders(2), 9_000, 3),
        ] {
            let c = count(p, 7);
            assert_eq!(c.rows, rows, "{p:?}");
            assert_eq!(c.fields as u64, rows * cols, "{p:?}");
        }
    }

    #[test]
    fn order_lines_match_the_orders_line_counts() {
        let seed = 42;
        let mut sum = 0u64;
        for d in 1..=DISTRICTS {
            sum += district_orders(seed, d)
                .1
                .iter()
                .map(|&n| u64::from(n))
                .sum::<u64>();
        }
        assert_eq!(count(Part::OrderLine(1), seed).rows, sum);
        // The same seed, the same rows: a resent part is identical.
        assert_eq!(
            count(Part::Stock(1), 9).first,
            count(Part::Stock(1), 9).first
        );
    }
}
