//! A Kubernetes release as users and API servers write it, and the target version
//! ([`KubeVersion`]) chosen from it: the one parser behind `--kubernetes-version`,
//! `kubernetesVersion` of `.vapcheck.yaml` and of the controller's configuration, and the
//! API server's `version.Info` minor.

use std::fmt;
use std::str::FromStr;

use super::{KubeVersion, VersionError};

/// A Kubernetes version `X.Y` or `X.Y.Z`, with or without a leading `v` (`1.37`, `v1.37.1`).
/// Each part is a `u32` as Rust parses one. Not checked against the versions vapcheck
/// supports: [`KubernetesVersion::supported`] does that.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct KubernetesVersion {
    /// Major (1).
    pub major: u32,
    /// Minor.
    pub minor: u32,
    /// Patch, when given.
    pub patch: Option<u32>,
}

impl FromStr for KubernetesVersion {
    type Err = VersionError;

    /// `X.Y` or `X.Y.Z`, optionally after a `v`; anything else is an error naming the text.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || VersionError(format!("`{s}` is not a version like 1.37 or 1.37.1"));
        let t = s.strip_prefix('v').unwrap_or(s);
        let number = |p: &str| p.parse::<u32>().map_err(|_| bad());
        let (major, minor, patch) = match t.split('.').collect::<Vec<_>>()[..] {
            [major, minor] => (number(major)?, number(minor)?, None),
            [major, minor, patch] => (number(major)?, number(minor)?, Some(number(patch)?)),
            _ => return Err(bad()),
        };
        Ok(KubernetesVersion {
            major,
            minor,
            patch,
        })
    }
}

impl fmt::Display for KubernetesVersion {
    /// `1.37` or `1.37.1`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)?;
        if let Some(p) = self.patch {
            write!(f, ".{p}")?;
        }
        Ok(())
    }
}

/// The text form (`1.37`, `1.37.1`), as [`fmt::Display`] writes it.
impl serde::Serialize for KubernetesVersion {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// From the text form, as [`FromStr`] reads it; the error names the value.
impl<'de> serde::Deserialize<'de> for KubernetesVersion {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

impl KubernetesVersion {
    /// A minor release `X.Y` (optionally `vX.Y`), without a patch: `--kubernetes-version` and
    /// `kubernetesVersion` of `.vapcheck.yaml` (clap's value parser; the message is clap's
    /// error text).
    pub fn parse_minor_release(s: &str) -> Result<Self, String> {
        match s.parse::<KubernetesVersion>() {
            Ok(v) if v.patch.is_none() => Ok(v),
            _ => Err(format!("expected X.Y, got {s:?}")),
        }
    }

    /// The target version of this release: `1.<minor>` within the versions vapcheck knows.
    pub fn supported(self) -> Result<KubeVersion, String> {
        if self.major != 1 {
            return Err(format!(
                "unsupported Kubernetes version {}.{}",
                self.major, self.minor
            ));
        }
        KubeVersion::new(self.minor).map_err(|e| e.to_string())
    }
}

impl KubeVersion {
    /// `1.<minor>` clamped into [`KubeVersion::MIN`]..=[`KubeVersion::PINNED`].
    pub fn clamped(minor: u32) -> KubeVersion {
        let minor = minor.clamp(Self::MIN.minor(), Self::PINNED.minor());
        KubeVersion::new(minor).unwrap_or(Self::PINNED)
    }

    /// The target for an API server whose `version.Info` minor is `minor` (`37`, or `37+` as
    /// managed clusters report it: trailing non-digits are dropped), clamped; the pinned
    /// release when it is not a number.
    pub fn of_server_minor(minor: &str) -> KubeVersion {
        let minor = minor
            .trim_end_matches(|c: char| !c.is_ascii_digit())
            .parse()
            .unwrap_or(Self::PINNED.minor());
        Self::clamped(minor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<(u32, u32, Option<u32>), String> {
        s.parse::<KubernetesVersion>()
            .map(|v| (v.major, v.minor, v.patch))
            .map_err(|e| e.to_string())
    }

    #[test]
    fn parses_minor_and_patch_releases() {
        assert_eq!(parse("1.37"), Ok((1, 37, None)));
        assert_eq!(parse("v1.36"), Ok((1, 36, None)));
        assert_eq!(parse("1.37.1"), Ok((1, 37, Some(1))));
        assert_eq!(parse("2.0"), Ok((2, 0, None)));
        for bad in [
            "",
            "1",
            "1.",
            "1.x",
            "1.37.",
            "1.37.1.2",
            "v",
            "1.37.1-gke.1",
            " 1.37",
        ] {
            assert_eq!(
                parse(bad),
                Err(format!("`{bad}` is not a version like 1.37 or 1.37.1")),
                "{bad:?}"
            );
        }
        assert_eq!(
            KubernetesVersion {
                major: 1,
                minor: 37,
                patch: Some(1)
            }
            .to_string(),
            "1.37.1"
        );
        assert_eq!(parse("v1.33").map(|_| ()), Ok(()));
    }

    #[test]
    fn serde_uses_the_text_form() {
        let v: KubernetesVersion = serde_json::from_str("\"v1.37.1\"").expect("parses");
        assert_eq!(
            serde_json::to_string(&v).ok().as_deref(),
            Some("\"1.37.1\"")
        );
        let e = serde_json::from_str::<KubernetesVersion>("\"1.x\"")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        // serde_json appends the position.
        assert!(
            e.starts_with("`1.x` is not a version like 1.37 or 1.37.1"),
            "{e}"
        );
        assert!(serde_json::from_str::<KubernetesVersion>("137").is_err());
    }

    #[test]
    fn minor_releases_have_no_patch() {
        let minor = |s| KubernetesVersion::parse_minor_release(s).map(|v| v.to_string());
        assert_eq!(minor("1.33"), Ok("1.33".to_owned()));
        assert_eq!(minor("v1.33"), Ok("1.33".to_owned()));
        assert_eq!(
            minor("1.33.1"),
            Err("expected X.Y, got \"1.33.1\"".to_owned())
        );
        assert_eq!(minor("1"), Err("expected X.Y, got \"1\"".to_owned()));
    }

    #[test]
    fn supported_and_server_versions() {
        let v = |s: &str| KubernetesVersion::parse_minor_release(s).expect("parses");
        assert_eq!(
            v("1.33").supported(),
            Ok(KubeVersion::new(33).expect("1.33"))
        );
        assert_eq!(
            v("2.30").supported(),
            Err("unsupported Kubernetes version 2.30".to_owned())
        );
        assert_eq!(
            v("1.29").supported(),
            Err("Kubernetes 1.29 is not supported (supported: 1.30..1.37)".to_owned())
        );
        assert_eq!(
            KubeVersion::of_server_minor("33+"),
            KubeVersion::new(33).expect("1.33")
        );
        assert_eq!(KubeVersion::of_server_minor("99"), KubeVersion::PINNED);
        assert_eq!(KubeVersion::of_server_minor("20"), KubeVersion::MIN);
        assert_eq!(KubeVersion::of_server_minor(""), KubeVersion::PINNED);
    }
}
