//! tpcc-mysql's report, byte for byte where scripts parse it: interval
//! lines (`  10, sc(lt):rt90|max, ...`), `<Raw Results>`, `<Raw Results2(sum
//! ver.)>`, `<Constraint Check>` and `<TpmC>`; then what tpcc-mysql lacks:
//! per-type percentiles, NOPM, efficiency and client CPU per New-Order.
use std::fmt::Write as _;

use hdrhistogram::Histogram;

use super::spec::Kind;

/// tpcc-mysql's four counters of one transaction type.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct KindTotals {
    /// Succeeded within the response-time limit.
    pub sc: u64,
    /// Succeeded late.
    pub lt: u64,
    /// Retries (deadlock, lock wait timeout).
    pub rt: u64,
    /// Failed.
    pub fl: u64,
    /// New-Orders ended by the 1 % rollback (counted in sc/lt, as tpcc-mysql).
    pub rolled_back: u64,
}

impl KindTotals {
    pub fn add(&mut self, o: &KindTotals) {
        self.sc += o.sc;
        self.lt += o.lt;
        self.rt += o.rt;
        self.fl += o.fl;
        self.rolled_back += o.rolled_back;
    }

    pub fn done(&self) -> u64 {
        self.sc + self.lt
    }
}

/// One type over one interval, as an interval line shows it.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct KindInterval {
    pub done: u64,
    pub late: u64,
    pub rt90_ms: f64,
    pub max_ms: f64,
}

impl KindInterval {
    pub fn of(t: &KindTotals, h: &Histogram<u64>) -> Self {
        let q = |x: f64| {
            if h.is_empty() {
                0.0
            } else {
                h.value_at_quantile(x) as f64 / 1000.0
            }
        };
        KindInterval {
            done: t.done(),
            late: t.lt,
            rt90_ms: q(0.90),
            max_ms: if h.is_empty() {
                0.0
            } else {
                h.max() as f64 / 1000.0
            },
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct TpccInterval {
    pub kinds: [KindInterval; 5],
}

/// One tpcc-mysql interval line: `time, done(late):rt90|max` per type.
pub fn interval_line(time_s: u64, iv: &TpccInterval) -> String {
    let mut s = format!("{time_s:4}");
    for k in &iv.kinds {
        let _ = write!(
            s,
            ", {}({}):{:.3}|{:.3}",
            k.done, k.late, k.rt90_ms, k.max_ms
        );
    }
    s
}

/// Latency percentiles of one type over the measured window, in ms.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct KindLatency {
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p95_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

impl KindLatency {
    fn of(h: &Histogram<u64>) -> Self {
        if h.is_empty() {
            return Self::default();
        }
        let q = |x: f64| h.value_at_quantile(x) as f64 / 1000.0;
        KindLatency {
            p50_ms: q(0.50),
            p90_ms: q(0.90),
            p95_ms: q(0.95),
            p99_ms: q(0.99),
            max_ms: h.max() as f64 / 1000.0,
        }
    }
}

/// One line of the Constraint Check.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Constraint {
    pub kind: Kind,
    pub pct: f64,
    pub ok: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Constraints {
    /// Payment >= 43 %, the three others >= 4 % of all done.
    pub mix: Vec<Constraint>,
    /// >= 90 % within the limit, per type.
    pub on_time: Vec<Constraint>,
}

/// The measured window of a TPC-C run.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct TpccSummary {
    pub totals: [KindTotals; 5],
    pub latency: [KindLatency; 5],
    pub measured_s: f64,
    pub warehouses: u32,
    /// New-Orders (rolled back included, as tpcc-mysql) per minute.
    pub tpmc: f64,
    /// New orders the database recorded (d_next_o_id) per minute.
    pub nopm: f64,
    /// tpmC against the spec's ceiling of 12.86 per warehouse, in %.
    pub efficiency_pct: f64,
    /// This process's CPU seconds over the window, per 1,000 New-Orders.
    pub cpu_s_per_1000_new_orders: Option<f64>,
    pub cpu_s: f64,
}

impl TpccSummary {
    pub fn new(
        totals: &[KindTotals; 5],
        hists: &[Histogram<u64>; 5],
        measured_s: f64,
        warehouses: u32,
        d_next_delta: u64,
        cpu_s: f64,
    ) -> Self {
        let per_min = |n: f64| {
            if measured_s > 0.0 {
                n * 60.0 / measured_s
            } else {
                0.0
            }
        };
        let no = totals[Kind::NewOrder.index()].done();
        let tpmc = per_min(no as f64);
        TpccSummary {
            totals: *totals,
            latency: std::array::from_fn(|k| KindLatency::of(&hists[k])),
            measured_s,
            warehouses,
            tpmc,
            nopm: per_min(d_next_delta as f64),
            efficiency_pct: 100.0 * tpmc / (12.86 * f64::from(warehouses.max(1))),
            cpu_s_per_1000_new_orders: (no > 0).then(|| cpu_s * 1000.0 / no as f64),
            cpu_s,
        }
    }

    pub fn failures(&self) -> u64 {
        self.totals.iter().map(|t| t.fl).sum()
    }

    /// Share of each type among completed transactions, in %.
    pub fn mix_pct(&self) -> [f64; 5] {
        let all: u64 = self.totals.iter().map(KindTotals::done).sum();
        std::array::from_fn(|k| {
            if all == 0 {
                0.0
            } else {
                100.0 * self.totals[k].done() as f64 / all as f64
            }
        })
    }

    /// tpcc-mysql's Constraint Check: the mix floors, then the share of
    /// each type done within its response-time limit (>= 90 %).
    pub fn constraint_check(&self) -> Constraints {
        let mix = self.mix_pct();
        let floors = [
            (Kind::Payment, 43.0),
            (Kind::OrderStatus, 4.0),
            (Kind::Delivery, 4.0),
            (Kind::StockLevel, 4.0),
        ];
        let pct = floors
            .iter()
            .map(|&(kind, floor)| Constraint {
                kind,
                pct: mix[kind.index()],
                ok: mix[kind.index()] >= floor,
            })
            .collect();
        let rt = Kind::ALL
            .iter()
            .map(|&k| {
                let t = &self.totals[k.index()];
                let f = if t.done() == 0 {
                    0.0
                } else {
                    100.0 * t.sc as f64 / t.done() as f64
                };
                Constraint {
                    kind: k,
                    pct: f,
                    ok: f >= 90.0,
                }
            })
            .collect();
        Constraints {
            mix: pct,
            on_time: rt,
        }
    }
}

fn ok(pass: bool) -> &'static str {
    if pass {
        " [OK]"
    } else {
        " [NG] *"
    }
}

/// The end-of-run blocks in tpcc-mysql's layout, then commitscope's own.
pub fn final_report(s: &TpccSummary) -> String {
    let mut o = String::new();
    let raw = |o: &mut String| {
        for (i, t) in s.totals.iter().enumerate() {
            let _ = writeln!(
                o,
                "  [{i}] sc:{}  lt:{}  rt:{}  fl:{} ",
                t.sc, t.lt, t.rt, t.fl
            );
        }
    };
    let _ = writeln!(o, "\n<Raw Results>");
    raw(&mut o);
    let _ = writeln!(o, " in {} sec.", s.measured_s.round() as u64);
    let _ = writeln!(o, "\n<Raw Results2(sum ver.)>");
    raw(&mut o);
    let checks = s.constraint_check();
    let _ = writeln!(
        o,
        "\n<Constraint Check> (all must be [OK])\n [transaction percentage]"
    );
    for c in checks.mix {
        let floor = if c.kind == Kind::Payment {
            "43.0"
        } else {
            " 4.0"
        };
        let label = format!("{}:", c.kind.name());
        let _ = writeln!(o, "{label:>16} {:3.2}% (>={floor}%){}", c.pct, ok(c.ok));
    }
    let _ = writeln!(o, " [response time (at least 90% passed)]");
    for c in checks.on_time {
        let label = format!("{}:", c.kind.name());
        let _ = writeln!(o, "{label:>16} {:3.2}% {}", c.pct, ok(c.ok));
    }
    let _ = writeln!(o, "\n<TpmC>");
    let _ = writeln!(o, "                 {:.3} TpmC", s.tpmc);
    let _ = writeln!(
        o,
        "\n<Latency> (ms, measured window; on time = within 5, 5, 5, 80, 20 s)\n{:>16} {:>9} {:>9} {:>9} {:>9} {:>9}",
        "", "p50", "p90", "p95", "p99", "max"
    );
    for k in Kind::ALL {
        let l = &s.latency[k.index()];
        let label = format!("{}:", k.name());
        let _ = writeln!(
            o,
            "{label:>16} {:>9.3} {:>9.3} {:>9.3} {:>9.3} {:>9.3}",
            l.p50_ms, l.p90_ms, l.p95_ms, l.p99_ms, l.max_ms
        );
    }
    let nor = s.totals[Kind::NewOrder.index()].rolled_back;
    let _ = writeln!(
        o,
        "\n<Summary>\n{:>16} {:.1}  (d_next_o_id per minute)\n{:>16} {:.1} %  (tpmC / (12.86 x {} warehouses))\n{:>16} {}  (in tpmC, as tpcc-mysql counts them)",
        "NOPM:", s.nopm, "efficiency:", s.efficiency_pct, s.warehouses, "NO rollbacks:", nor
    );
    match s.cpu_s_per_1000_new_orders {
        Some(c) => {
            let _ = writeln!(
                o,
                "{:>16} {c:.3} s per 1,000 New-Orders  ({:.2} s in all)",
                "client CPU:", s.cpu_s
            );
        }
        None => {
            let _ = writeln!(o, "{:>16} -", "client CPU:");
        }
    }
    o
}

/// The tpmC figure of a report (what scripts grep for).
pub fn parse_tpmc(report: &str) -> Option<f64> {
    let mut lines = report.lines();
    lines.find(|l| l.trim() == "<TpmC>")?;
    lines
        .next()?
        .trim()
        .strip_suffix("TpmC")?
        .trim()
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::new_hist;

    fn summary() -> TpccSummary {
        let mut totals = [KindTotals::default(); 5];
        let n = [450, 430, 45, 44, 43];
        for (t, n) in totals.iter_mut().zip(n) {
            t.sc = n;
        }
        totals[0].lt = 5;
        let hists = std::array::from_fn(|_| {
            let mut h = new_hist();
            for v in 1..=100 {
                h.record(v * 100).unwrap();
            }
            h
        });
        TpccSummary::new(&totals, &hists, 60.0, 2, 450, 1.5)
    }

    #[test]
    fn interval_line_is_tpcc_mysql_s() {
        let mut iv = TpccInterval::default();
        iv.kinds[0] = KindInterval {
            done: 120,
            late: 1,
            rt90_ms: 12.5,
            max_ms: 40.25,
        };
        assert_eq!(
            interval_line(10, &iv),
            "  10, 120(1):12.500|40.250, 0(0):0.000|0.000, 0(0):0.000|0.000, 0(0):0.000|0.000, 0(0):0.000|0.000"
        );
    }

    #[test]
    fn report_parses_back_and_checks_the_mix() {
        let s = summary();
        let text = final_report(&s);
        assert_eq!(parse_tpmc(&text), Some(455.0));
        assert!(text.contains("  [0] sc:450  lt:5  rt:0  fl:0 \n"), "{text}");
        assert!(text.contains(" in 60 sec.\n"), "{text}");
        assert!(
            text.contains("        Payment: 42.28% (>=43.0%) [NG] *"),
            "{text}"
        );
        assert!(
            text.contains("   Order-Status: 4.42% (>= 4.0%) [OK]"),
            "{text}"
        );
        assert!(text.contains("      New-Order: 98.90%  [OK]"), "{text}");
        assert!((s.efficiency_pct - 100.0 * 455.0 / 25.72).abs() < 1e-9);
        assert_eq!(s.nopm, 450.0);
        assert_eq!(parse_tpmc("no report"), None);
    }
}
