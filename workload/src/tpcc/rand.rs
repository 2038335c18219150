//! TPC-C's random functions (TPC-C 5.11, clause 2.1.6 and 4.3.2): uniform
//! numbers, NURand with its C constants, a-strings, n-strings, last names
//! from syllables, and the 10 % "ORIGINAL" marker.
use fastrand::Rng;

/// The three NURand constants of one run or one load (clause 2.1.6).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct NuConstants {
    /// For C_LAST (A = 255).
    pub c_last: u32,
    /// For C_ID (A = 1023).
    pub c_id: u32,
    /// For OL_I_ID (A = 8191).
    pub ol_i_id: u32,
}

impl NuConstants {
    /// Constants for a load: drawn at random, stored with the data.
    pub fn for_load(rng: &mut Rng) -> Self {
        NuConstants {
            c_last: rng.u32(0..=255),
            c_id: rng.u32(0..=1023),
            ol_i_id: rng.u32(0..=8191),
        }
    }

    /// Constants for a run against data loaded with `load`: C_ID and
    /// OL_I_ID are the load's; C_LAST differs from the load's by a delta in
    /// 65..=119 that is neither 96 nor 112 (clause 2.1.6.1).
    pub fn for_run(load: &NuConstants, rng: &mut Rng) -> Self {
        loop {
            let c = rng.u32(0..=255);
            let delta = c.abs_diff(load.c_last);
            if (65..=119).contains(&delta) && delta != 96 && delta != 112 {
                return NuConstants { c_last: c, ..*load };
            }
        }
    }

    pub fn valid_run_pair(load: &NuConstants, run: &NuConstants) -> bool {
        let delta = run.c_last.abs_diff(load.c_last);
        (65..=119).contains(&delta)
            && delta != 96
            && delta != 112
            && run.c_id == load.c_id
            && run.ol_i_id == load.ol_i_id
    }
}

/// NURand(A, x, y) = (((random(0, A) | random(x, y)) + C) % (y - x + 1)) + x.
pub fn nurand(rng: &mut Rng, a: u32, c: u32, x: u32, y: u32) -> u32 {
    (((rng.u32(0..=a) | rng.u32(x..=y)) + c) % (y - x + 1)) + x
}

const SYLLABLES: [&str; 10] = [
    "BAR", "OUGHT", "ABLE", "PRI", "PRES", "ESE", "ANTI", "CALLY", "ATION", "EING",
];

/// The customer last name of number `n` (0..=999): three syllables, one per
/// decimal digit.
pub fn last_name(n: u32) -> String {
    let mut s = String::with_capacity(16);
    for d in [n / 100, (n / 10) % 10, n % 10] {
        s.push_str(SYLLABLES[d as usize]);
    }
    s
}

const ALNUM: &[u8; 62] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";

/// Appends an a-string of random length in `min..=max` (letters and digits:
/// nothing to escape in SQL).
pub fn astring(rng: &mut Rng, min: usize, max: usize, out: &mut String) {
    let n = rng.usize(min..=max);
    for _ in 0..n {
        out.push(ALNUM[rng.usize(0..ALNUM.len())] as char);
    }
}

/// Appends an n-string (digits) of random length in `min..=max`.
pub fn nstring(rng: &mut Rng, min: usize, max: usize, out: &mut String) {
    let n = rng.usize(min..=max);
    for _ in 0..n {
        out.push(char::from(b'0' + rng.u8(0..10)));
    }
}

/// I_DATA / S_DATA: an a-string of 26..=50 characters; in 10 % of rows
/// "ORIGINAL" replaces eight characters at a random position (clause
/// 4.3.3.1; tpcc-mysql writes "original" in lower case).
pub fn data_with_original(rng: &mut Rng, out: &mut String) {
    let start = out.len();
    astring(rng, 26, 50, out);
    if rng.u32(1..=100) <= 10 {
        let len = out.len() - start;
        let at = start + rng.usize(0..=len - 8);
        out.replace_range(at..at + 8, "ORIGINAL");
    }
}

/// A zip code: four random digits then "11111".
pub fn zip(rng: &mut Rng, out: &mut String) {
    nstring(rng, 4, 4, out);
    out.push_str("11111");
}

/// Two random upper-case letters.
pub fn state(rng: &mut Rng, out: &mut String) {
    for _ in 0..2 {
        out.push(char::from(b'A' + rng.u8(0..26)));
    }
}

/// A decimal with `scale` digits after the point, uniform in
/// `lo..=hi` (given in units of 10^-scale).
pub fn fixed(rng: &mut Rng, lo: u32, hi: u32, scale: u32) -> String {
    let v = rng.u32(lo..=hi);
    let p = 10u32.pow(scale);
    format!("{}.{:0width$}", v / p, v % p, width = scale as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn last_names_follow_the_syllables() {
        assert_eq!(last_name(0), "BARBARBAR");
        assert_eq!(last_name(371), "PRICALLYOUGHT");
        assert_eq!(last_name(999), "EINGEINGEING");
    }

    #[test]
    fn run_constants_obey_the_delta_rule() {
        let mut rng = Rng::with_seed(7);
        for _ in 0..1000 {
            let load = NuConstants::for_load(&mut rng);
            let run = NuConstants::for_run(&load, &mut rng);
            assert!(NuConstants::valid_run_pair(&load, &run), "{load:?} {run:?}");
        }
        let load = NuConstants {
            c_last: 100,
            c_id: 1,
            ol_i_id: 2,
        };
        let bad = NuConstants {
            c_last: 196,
            ..load
        };
        assert!(
            !NuConstants::valid_run_pair(&load, &bad),
            "delta 96 is excluded"
        );
    }

    #[test]
    fn nurand_stays_in_range_and_is_skewed() {
        let mut rng = Rng::with_seed(1);
        let mut hits = vec![0u32; 3001];
        for _ in 0..300_000 {
            let v = nurand(&mut rng, 1023, 259, 1, 3000);
            assert!((1..=3000).contains(&v));
            hits[v as usize] += 1;
        }
        let max = *hits.iter().max().unwrap();
        // Uniform would put ~100 on each; NURand piles up on some ids.
        assert!(max > 300, "max hits {max}");
    }

    #[test]
    fn original_appears_in_about_a_tenth() {
        let mut rng = Rng::with_seed(3);
        let mut n = 0;
        for _ in 0..10_000 {
            let mut s = String::new();
            data_with_original(&mut rng, &mut s);
            assert!((26..=50).contains(&s.len()), "{s}");
            n += s.contains("ORIGINAL") as u32;
        }
        assert!((800..=1200).contains(&n), "{n} of 10000");
    }

    #[test]
    fn fixed_point_text() {
        let mut rng = Rng::with_seed(1);
        for _ in 0..100 {
            let t = fixed(&mut rng, 0, 2000, 4);
            let v: f64 = t.parse().unwrap();
            assert!((0.0..=0.2).contains(&v), "{t}");
            assert_eq!(t.split('.').nth(1).unwrap().len(), 4);
        }
    }
}
