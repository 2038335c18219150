//! A TPC-C workload compatible with Percona's tpcc-mysql: its schema, its
//! transaction mix and its report layout, with the TPC-C specification
//! followed where tpcc-mysql strays from it (docs/tpcc.md).
pub mod check;
pub mod driver;
pub mod gen;
pub mod load;
pub mod prepare;
pub mod rand;
pub mod report;
pub mod schema;
pub mod spec;
pub mod txn;

pub use spec::{Kind, Settings, CUSTOMERS_PER_DISTRICT, DISTRICTS, ITEMS, NEW_ORDER_FIRST};
