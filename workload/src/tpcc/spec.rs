//! The specification's fixed sizes, the five transactions and the TPC-C
//! settings (the loader's method among them): what every other TPC-C file
//! reads, importing none of them.
/// Items in the catalogue (one set for all warehouses).
pub const ITEMS: u32 = 100_000;
pub const DISTRICTS: u32 = 10;
pub const CUSTOMERS_PER_DISTRICT: u32 = 3_000;
/// The first undelivered order of each district after a load (2101..=3000).
pub const NEW_ORDER_FIRST: u32 = 2_101;

/// The five transactions, in tpcc-mysql's report order ([0]..[4]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    NewOrder,
    Payment,
    OrderStatus,
    Delivery,
    StockLevel,
}

impl Kind {
    pub const ALL: [Kind; 5] = [
        Kind::NewOrder,
        Kind::Payment,
        Kind::OrderStatus,
        Kind::Delivery,
        Kind::StockLevel,
    ];

    pub fn index(self) -> usize {
        self as usize
    }

    /// As tpcc-mysql's Constraint Check spells it.
    pub fn name(self) -> &'static str {
        match self {
            Kind::NewOrder => "New-Order",
            Kind::Payment => "Payment",
            Kind::OrderStatus => "Order-Status",
            Kind::Delivery => "Delivery",
            Kind::StockLevel => "Stock-Level",
        }
    }

    /// The 90th-percentile response-time limit, in seconds (TPC-C clause
    /// 5.2.5.4; Delivery runs whole, so its deferred limit applies).
    /// tpcc-mysql has the same numbers but compares milliseconds to them.
    pub fn limit_s(self) -> f64 {
        match self {
            Kind::NewOrder | Kind::Payment | Kind::OrderStatus => 5.0,
            Kind::Delivery => 80.0,
            Kind::StockLevel => 20.0,
        }
    }

    /// Cards of each kind in the 23-card deck (10/10/1/1/1).
    pub fn cards(self) -> usize {
        match self {
            Kind::NewOrder | Kind::Payment => 10,
            _ => 1,
        }
    }

    /// Keying time and mean think time in seconds (clause 5.2.5.7), used
    /// only with `--think`.
    pub fn keying_think_s(self) -> (f64, f64) {
        match self {
            Kind::NewOrder => (18.0, 12.0),
            Kind::Payment => (3.0, 12.0),
            Kind::OrderStatus => (2.0, 10.0),
            Kind::Delivery | Kind::StockLevel => (2.0, 5.0),
        }
    }
}

/// TPC-C settings beyond the common workload flags.
#[derive(Clone, Debug, PartialEq)]
pub struct Settings {
    pub warehouses: u32,
    pub foreign_keys: bool,
    pub delivery_single_commit: bool,
    pub think: bool,
    pub load_parallel: Option<usize>,
    pub load_method: LoadMethod,
    pub load_binlog: bool,
}

impl Settings {
    /// Loader connections: the machine's cores twice over (the server
    /// works while the client generates), never more than the units of
    /// work (three per warehouse, plus the items).
    pub fn load_parallel(&self) -> usize {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        self.load_parallel
            .unwrap_or(2 * cores)
            .clamp(1, 3 * self.warehouses as usize + 1)
    }
}

/// How the rows reach the server (`--load-method`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum LoadMethod {
    /// `infile` when the server allows `local_infile`, else `insert`.
    #[default]
    Auto,
    /// `LOAD DATA LOCAL INFILE`, streamed from memory: no SQL to parse
    /// per row (`cargo xtask bench tpcc --load-only`).
    Infile,
    /// Multi-row `INSERT`s of 500-1,000 rows.
    Insert,
}
