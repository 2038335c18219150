//! tpcc-mysql's schema (create_table.sql, add_fkey_idx.sql): the same nine
//! tables, column types, primary keys, four secondary indexes and ten
//! foreign keys, plus commitscope's load record `_commitscope_tpcc`.
//!
//! The load record is written before the first table and marked complete
//! after the last check, so an interrupted load is never mistaken for a
//! finished one.
use mysql::{prelude::Queryable, Conn};

use super::rand::NuConstants;
use crate::error::{Error, Result};

/// The nine tables, in load order.
pub const TABLES: [&str; 9] = [
    "warehouse",
    "district",
    "customer",
    "history",
    "new_orders",
    "orders",
    "order_line",
    "item",
    "stock",
];

pub const LOAD_RECORD: &str = "_commitscope_tpcc";
/// The warehouses an unfinished load has finished (0: the items).
pub const LOAD_PROGRESS: &str = "_commitscope_tpcc_done";

const CREATE: [&str; 9] = [
    "CREATE TABLE warehouse (w_id smallint not null, w_name varchar(10), w_street_1 varchar(20), \
     w_street_2 varchar(20), w_city varchar(20), w_state char(2), w_zip char(9), w_tax decimal(4,2), \
     w_ytd decimal(12,2), PRIMARY KEY (w_id)) ENGINE=InnoDB",
    "CREATE TABLE district (d_id tinyint not null, d_w_id smallint not null, d_name varchar(10), \
     d_street_1 varchar(20), d_street_2 varchar(20), d_city varchar(20), d_state char(2), d_zip char(9), \
     d_tax decimal(4,2), d_ytd decimal(12,2), d_next_o_id int, PRIMARY KEY (d_w_id, d_id)) ENGINE=InnoDB",
    "CREATE TABLE customer (c_id int not null, c_d_id tinyint not null, c_w_id smallint not null, \
     c_first varchar(16), c_middle char(2), c_last varchar(16), c_street_1 varchar(20), \
     c_street_2 varchar(20), c_city varchar(20), c_state char(2), c_zip char(9), c_phone char(16), \
     c_since datetime, c_credit char(2), c_credit_lim bigint, c_discount decimal(4,2), \
     c_balance decimal(12,2), c_ytd_payment decimal(12,2), c_payment_cnt smallint, \
     c_delivery_cnt smallint, c_data text, PRIMARY KEY (c_w_id, c_d_id, c_id)) ENGINE=InnoDB",
    "CREATE TABLE history (h_c_id int, h_c_d_id tinyint, h_c_w_id smallint, h_d_id tinyint, \
     h_w_id smallint, h_date datetime, h_amount decimal(6,2), h_data varchar(24)) ENGINE=InnoDB",
    "CREATE TABLE new_orders (no_o_id int not null, no_d_id tinyint not null, no_w_id smallint not null, \
     PRIMARY KEY (no_w_id, no_d_id, no_o_id)) ENGINE=InnoDB",
    "CREATE TABLE orders (o_id int not null, o_d_id tinyint not null, o_w_id smallint not null, \
     o_c_id int, o_entry_d datetime, o_carrier_id tinyint, o_ol_cnt tinyint, o_all_local tinyint, \
     PRIMARY KEY (o_w_id, o_d_id, o_id)) ENGINE=InnoDB",
    "CREATE TABLE order_line (ol_o_id int not null, ol_d_id tinyint not null, ol_w_id smallint not null, \
     ol_number tinyint not null, ol_i_id int, ol_supply_w_id smallint, ol_delivery_d datetime, \
     ol_quantity tinyint, ol_amount decimal(6,2), ol_dist_info char(24), \
     PRIMARY KEY (ol_w_id, ol_d_id, ol_o_id, ol_number)) ENGINE=InnoDB",
    "CREATE TABLE item (i_id int not null, i_im_id int, i_name varchar(24), i_price decimal(5,2), \
     i_data varchar(50), PRIMARY KEY (i_id)) ENGINE=InnoDB",
    "CREATE TABLE stock (s_i_id int not null, s_w_id smallint not null, s_quantity smallint, \
     s_dist_01 char(24), s_dist_02 char(24), s_dist_03 char(24), s_dist_04 char(24), \
     s_dist_05 char(24), s_dist_06 char(24), s_dist_07 char(24), s_dist_08 char(24), \
     s_dist_09 char(24), s_dist_10 char(24), s_ytd decimal(8,0), s_order_cnt smallint, \
     s_remote_cnt smallint, s_data varchar(50), PRIMARY KEY (s_w_id, s_i_id)) ENGINE=InnoDB",
];

/// tpcc-mysql's four secondary indexes, built after the data.
pub const INDEXES: [&str; 4] = [
    "ALTER TABLE customer ADD INDEX idx_customer (c_w_id,c_d_id,c_last,c_first)",
    "ALTER TABLE orders ADD INDEX idx_orders (o_w_id,o_d_id,o_c_id,o_id)",
    "ALTER TABLE stock ADD INDEX fkey_stock_2 (s_i_id)",
    "ALTER TABLE order_line ADD INDEX fkey_order_line_2 (ol_supply_w_id,ol_i_id)",
];

/// tpcc-mysql's ten foreign keys (`--foreign-keys`).
pub const FOREIGN_KEYS: [&str; 10] = [
    "ALTER TABLE district ADD CONSTRAINT fkey_district_1 FOREIGN KEY(d_w_id) REFERENCES warehouse(w_id)",
    "ALTER TABLE customer ADD CONSTRAINT fkey_customer_1 FOREIGN KEY(c_w_id,c_d_id) REFERENCES district(d_w_id,d_id)",
    "ALTER TABLE history ADD CONSTRAINT fkey_history_1 FOREIGN KEY(h_c_w_id,h_c_d_id,h_c_id) REFERENCES customer(c_w_id,c_d_id,c_id)",
    "ALTER TABLE history ADD CONSTRAINT fkey_history_2 FOREIGN KEY(h_w_id,h_d_id) REFERENCES district(d_w_id,d_id)",
    "ALTER TABLE new_orders ADD CONSTRAINT fkey_new_orders_1 FOREIGN KEY(no_w_id,no_d_id,no_o_id) REFERENCES orders(o_w_id,o_d_id,o_id)",
    "ALTER TABLE orders ADD CONSTRAINT fkey_orders_1 FOREIGN KEY(o_w_id,o_d_id,o_c_id) REFERENCES customer(c_w_id,c_d_id,c_id)",
    "ALTER TABLE order_line ADD CONSTRAINT fkey_order_line_1 FOREIGN KEY(ol_w_id,ol_d_id,ol_o_id) REFERENCES orders(o_w_id,o_d_id,o_id)",
    "ALTER TABLE order_line ADD CONSTRAINT fkey_order_line_2 FOREIGN KEY(ol_supply_w_id,ol_i_id) REFERENCES stock(s_w_id,s_i_id)",
    "ALTER TABLE stock ADD CONSTRAINT fkey_stock_1 FOREIGN KEY(s_w_id) REFERENCES warehouse(w_id)",
    "ALTER TABLE stock ADD CONSTRAINT fkey_stock_2 FOREIGN KEY(s_i_id) REFERENCES item(i_id)",
];

/// What the load record says about the data in a database.
#[derive(Clone, Debug, PartialEq)]
pub struct LoadRecord {
    pub warehouses: u32,
    pub complete: bool,
    pub constants: NuConstants,
    pub foreign_keys: bool,
}

pub(crate) fn sql(context: &'static str) -> impl Fn(mysql::Error) -> Error {
    move |e| Error::Tpcc {
        context,
        detail: e.to_string(),
    }
}

/// True when the connection's database has a table `name`.
fn table_exists(c: &mut Conn, name: &str, context: &'static str) -> Result<bool> {
    let n: Option<u64> = c
        .exec_first(
            "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?",
            (name,),
        )
        .map_err(sql(context))?;
    Ok(n.unwrap_or(0) > 0)
}

/// The load record, if the tables were ever created here.
pub fn read_record(c: &mut Conn) -> Result<Option<LoadRecord>> {
    if !table_exists(c, LOAD_RECORD, "reading the load record")? {
        return Ok(None);
    }
    let row: Option<(u32, u8, u32, u32, u32, u8)> = c
        .query_first(format!(
            "SELECT warehouses, complete, c_last, c_id, ol_i_id, foreign_keys FROM `{LOAD_RECORD}` LIMIT 1"
        ))
        .map_err(sql("reading the load record"))?;
    Ok(row.map(|(w, done, c_last, c_id, ol_i_id, fk)| LoadRecord {
        warehouses: w,
        complete: done != 0,
        constants: NuConstants {
            c_last,
            c_id,
            ol_i_id,
        },
        foreign_keys: fk != 0,
    }))
}

/// Drops the tables of an earlier load (only ever called in a database
/// commitscope created and marked) and writes a new, incomplete record.
pub fn recreate(c: &mut Conn, rec: &LoadRecord) -> Result<()> {
    c.query_drop("SET FOREIGN_KEY_CHECKS=0")
        .map_err(sql("dropping the previous load"))?;
    let all: Vec<String> = TABLES
        .iter()
        .chain([&LOAD_RECORD, &LOAD_PROGRESS])
        .map(|t| format!("`{t}`"))
        .collect();
    c.query_drop(format!("DROP TABLE IF EXISTS {}", all.join(", ")))
        .map_err(sql("dropping the previous load"))?;
    c.query_drop(format!(
        "CREATE TABLE `{LOAD_RECORD}` (warehouses INT NOT NULL, complete TINYINT NOT NULL, \
         c_last INT NOT NULL, c_id INT NOT NULL, ol_i_id INT NOT NULL, foreign_keys TINYINT NOT NULL, \
         started TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP) ENGINE=InnoDB"
    ))
    .map_err(sql("creating the load record"))?;
    c.exec_drop(
        format!(
            "INSERT INTO `{LOAD_RECORD}` (warehouses, complete, c_last, c_id, ol_i_id, foreign_keys) VALUES (?, 0, ?, ?, ?, ?)"
        ),
        (
            rec.warehouses,
            rec.constants.c_last,
            rec.constants.c_id,
            rec.constants.ol_i_id,
            rec.foreign_keys as u8,
        ),
    )
    .map_err(sql("writing the load record"))?;
    c.query_drop(format!(
        "CREATE TABLE `{LOAD_PROGRESS}` (w INT NOT NULL PRIMARY KEY) ENGINE=InnoDB"
    ))
    .map_err(sql("creating the load progress table"))?;
    for ddl in CREATE {
        c.query_drop(ddl)
            .map_err(sql("creating the TPC-C tables"))?;
    }
    c.query_drop("SET FOREIGN_KEY_CHECKS=1")
        .map_err(sql("dropping the previous load"))?;
    Ok(())
}

/// Marks the load finished: the last step of a load.
pub fn mark_complete(c: &mut Conn) -> Result<()> {
    c.query_drop(format!("UPDATE `{LOAD_RECORD}` SET complete = 1"))
        .map_err(sql("marking the load complete"))
}

/// The warehouses (0: the items) an unfinished load recorded as done;
/// None when the load predates the progress table (it cannot resume).
pub fn loaded_warehouses(c: &mut Conn) -> Result<Option<Vec<u32>>> {
    if !table_exists(c, LOAD_PROGRESS, "reading the load progress")? {
        return Ok(None);
    }
    let done: Vec<u32> = c
        .query(format!("SELECT w FROM `{LOAD_PROGRESS}` ORDER BY w"))
        .map_err(sql("reading the load progress"))?;
    Ok(Some(done))
}

/// Records a finished warehouse (0: the items).
pub fn record_warehouse(c: &mut Conn, w: u32) -> Result<()> {
    c.exec_drop(
        format!("INSERT IGNORE INTO `{LOAD_PROGRESS}` (w) VALUES (?)"),
        (w,),
    )
    .map_err(sql("recording a loaded warehouse"))
}

/// Each table's warehouse column, for removing a warehouse's rows.
const WAREHOUSE_COLUMN: [(&str, &str); 8] = [
    ("warehouse", "w_id"),
    ("district", "d_w_id"),
    ("customer", "c_w_id"),
    ("history", "h_w_id"),
    ("new_orders", "no_w_id"),
    ("orders", "o_w_id"),
    ("order_line", "ol_w_id"),
    ("stock", "s_w_id"),
];

/// Removes the rows of every warehouse of `1..=w` not in `done` (an
/// interrupted load's partial warehouses), and the items unless 0 is in
/// `done`: the resumed load sends them again, whole.
pub fn remove_partial(c: &mut Conn, w: u32, done: &[u32]) -> Result<()> {
    let partial: Vec<String> = (1..=w)
        .filter(|x| !done.contains(x))
        .map(|x| x.to_string())
        .collect();
    if !partial.is_empty() {
        let list = partial.join(",");
        for (table, col) in WAREHOUSE_COLUMN {
            c.query_drop(format!("DELETE FROM {table} WHERE {col} IN ({list})"))
                .map_err(sql("removing a partial warehouse"))?;
        }
    }
    if !done.contains(&0) {
        c.query_drop("DELETE FROM item")
            .map_err(sql("removing partial items"))?;
    }
    Ok(())
}

/// The index names and the foreign key names the tables already have.
pub fn existing_keys(c: &mut Conn) -> Result<(Vec<String>, Vec<String>)> {
    let indexes: Vec<String> = c
        .query("SELECT DISTINCT INDEX_NAME FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = DATABASE()")
        .map_err(sql("reading the indexes"))?;
    let fks: Vec<String> = c
        .query("SELECT CONSTRAINT_NAME FROM information_schema.TABLE_CONSTRAINTS WHERE TABLE_SCHEMA = DATABASE() AND CONSTRAINT_TYPE = 'FOREIGN KEY'")
        .map_err(sql("reading the foreign keys"))?;
    Ok((indexes, fks))
}

/// True when `ddl` (one of [`INDEXES`] / [`FOREIGN_KEYS`]) adds `name`.
pub fn ddl_names(ddl: &str, name: &str) -> bool {
    ddl.contains(&format!("ADD INDEX {name} ")) || ddl.contains(&format!("ADD CONSTRAINT {name} "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ddl_is_matched_by_its_name() {
        assert!(ddl_names(INDEXES[0], "idx_customer"));
        assert!(!ddl_names(INDEXES[0], "idx_orders"));
        assert!(ddl_names(FOREIGN_KEYS[7], "fkey_order_line_2"));
        // An index and a foreign key share this name: each list is
        // matched against its own kind (load::finish).
        assert!(ddl_names(INDEXES[3], "fkey_order_line_2"));
    }
}
