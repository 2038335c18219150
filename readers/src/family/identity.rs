//! Which server: a family and a version. How a name or a `--version`
//! line is read into one is the rows' ([`super::rows`]): each family
//! says how it is spelled.
use std::fmt;

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Flavor {
    MySql,
    MariaDb,
}

/// A server version as far as the probe table cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Version {
    pub major: u32,
    pub minor: u32,
    pub patch: u32,
}

impl Version {
    /// The release series, `(major, minor)`: servers of one series share a
    /// datadir format and system tables.
    pub fn series(&self) -> (u32, u32) {
        (self.major, self.minor)
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

/// A detected or user-given server identity.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServerId {
    pub flavor: Flavor,
    pub version: Version,
}

pub(super) fn parse_version(s: &str) -> Option<Version> {
    let mut it = s.split('.').map(|p| {
        let digits: String = p.chars().take_while(char::is_ascii_digit).collect();
        digits.parse::<u32>().ok()
    });
    let major = it.next()??;
    let minor = it.next()??;
    let patch = it.next().flatten().unwrap_or(0);
    Some(Version {
        major,
        minor,
        patch,
    })
}
