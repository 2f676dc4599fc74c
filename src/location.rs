//! Where a source, a table, a checkpoint or a schema location lives: a local folder or an
//! object-store prefix. Parsed once, where the arguments or the config file are read, and
//! passed to every layer as it is, so no layer sniffs strings for a scheme.

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use url::Url;

/// A local folder or an S3 prefix.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Location {
    /// A local folder (`file:///x` is taken as `/x`). May be relative until it is resolved.
    Local(PathBuf),
    /// `s3://bucket/prefix` (`s3a://` is read as `s3://`), kept without a trailing slash.
    /// Credentials and endpoint come from the standard AWS environment.
    S3(Url),
}

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LocationError {
    #[error(
        "{location}: the {scheme}:// scheme is not supported; use a local path, file://PATH or s3://BUCKET/PREFIX"
    )]
    UnsupportedScheme { location: String, scheme: String },
    #[error("{location}: {reason}")]
    Invalid { location: String, reason: String },
}

/// The scheme of `text` when it starts like a URL (`scheme://`), as RFC 3986 spells one.
fn scheme_of(text: &str) -> Option<&str> {
    let (scheme, _) = text.split_once("://")?;
    let mut chars = scheme.chars();
    let first = chars.next()?;
    (first.is_ascii_alphabetic()
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')))
    .then_some(scheme)
}

impl Location {
    /// Parses a location argument: a path, `file://PATH`, or `s3://BUCKET[/PREFIX]`. Any
    /// other scheme (`gs://`, `abfss://`, `az://`, ...) is refused, naming it.
    pub fn parse(text: &str) -> Result<Location, LocationError> {
        let invalid = |reason: &str| LocationError::Invalid {
            location: text.to_string(),
            reason: reason.to_string(),
        };
        let Some(scheme) = scheme_of(text) else {
            if text.is_empty() {
                return Err(invalid("an empty location"));
            }
            return Ok(Location::Local(PathBuf::from(text)));
        };
        match scheme.to_ascii_lowercase().as_str() {
            "file" => {
                let path = &text[scheme.len() + 3..];
                if path.is_empty() {
                    return Err(invalid("file:// names no path"));
                }
                Ok(Location::Local(PathBuf::from(path)))
            }
            "s3" | "s3a" => {
                let rest = text[scheme.len() + 3..].trim_end_matches('/');
                let mut url = Url::parse(&format!("s3://{rest}"))
                    .map_err(|e| invalid(&format!("not a valid URL: {e}")))?;
                if url.host_str().is_none_or(str::is_empty) {
                    return Err(invalid("no bucket: use s3://BUCKET/PREFIX"));
                }
                if url.query().is_some() || url.fragment().is_some() {
                    return Err(invalid("a location takes no ?query or #fragment"));
                }
                let path = url.path().trim_end_matches('/').to_string();
                url.set_path(&path);
                Ok(Location::S3(url))
            }
            _ => Err(LocationError::UnsupportedScheme {
                location: text.to_string(),
                scheme: scheme.to_string(),
            }),
        }
    }

    /// A relative local location taken relative to `base` (a config file's folder); any
    /// other location as it is.
    pub fn relative_to(self, base: &Path) -> Location {
        match self {
            Location::Local(p) if p.is_relative() => Location::Local(base.join(p)),
            other => other,
        }
    }

    /// The location of `name` inside this one.
    pub fn join(&self, name: &str) -> Location {
        match self {
            Location::Local(p) => Location::Local(p.join(name)),
            Location::S3(url) => {
                let mut url = url.clone();
                let path = format!("{}/{}", url.path().trim_end_matches('/'), name);
                url.set_path(&path);
                Location::S3(url)
            }
        }
    }

    /// The location this one lies in, if it has one (`s3://b/t/x` is in `s3://b/t`).
    pub fn parent(&self) -> Option<Location> {
        match self {
            Location::Local(p) => p.parent().map(|p| Location::Local(p.to_path_buf())),
            Location::S3(url) => {
                let path = url.path().trim_end_matches('/');
                let (parent, _) = path.rsplit_once('/').filter(|_| !path.is_empty())?;
                let mut url = url.clone();
                url.set_path(parent);
                Some(Location::S3(url))
            }
        }
    }

    /// The local folder, when this is one.
    pub fn as_local(&self) -> Option<&Path> {
        match self {
            Location::Local(p) => Some(p),
            Location::S3(_) => None,
        }
    }

    /// The last segment of the location (a table's folder name), if it has one.
    pub fn file_name(&self) -> Option<String> {
        match self {
            Location::Local(p) => p.file_name().map(|n| n.to_string_lossy().into_owned()),
            Location::S3(url) => url
                .path_segments()
                .and_then(|mut s| s.next_back())
                .filter(|s| !s.is_empty())
                .map(str::to_string),
        }
    }

    /// A form for comparing two locations that may not exist yet (`a/./b/../c` is `a/c`).
    pub fn normalized(&self) -> Location {
        match self {
            Location::Local(p) => {
                let mut out = PathBuf::new();
                for c in p.components() {
                    match c {
                        std::path::Component::ParentDir => {
                            out.pop();
                        }
                        std::path::Component::CurDir => {}
                        other => out.push(other),
                    }
                }
                Location::Local(out)
            }
            Location::S3(_) => self.clone(),
        }
    }

    /// A local location made absolute with links resolved, as far as it exists (a table or
    /// checkpoint may not exist yet): its nearest existing ancestor canonicalized, the rest
    /// appended. What two spellings of one folder compare equal by. S3 as it is.
    pub fn resolved(&self) -> Location {
        let Location::Local(path) = self.normalized() else {
            return self.clone();
        };
        let absolute = std::path::absolute(&path).unwrap_or(path);
        let mut rest = Vec::new();
        let mut at = absolute.as_path();
        loop {
            if let Ok(canonical) = std::fs::canonicalize(at) {
                return Location::Local(rest.iter().rev().fold(canonical, |p, c| p.join(c)));
            }
            match (at.parent(), at.file_name()) {
                (Some(parent), Some(name)) => {
                    rest.push(name.to_os_string());
                    at = parent;
                }
                _ => return Location::Local(absolute),
            }
        }
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::Local(p) => write!(f, "{}", p.display()),
            Location::S3(url) => f.write_str(url.as_str()),
        }
    }
}

impl FromStr for Location {
    type Err = LocationError;

    fn from_str(text: &str) -> Result<Location, LocationError> {
        Location::parse(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_paths_and_file_urls_are_local() {
        assert_eq!(
            Location::parse("landing/orders").unwrap(),
            Location::Local(PathBuf::from("landing/orders"))
        );
        assert_eq!(
            Location::parse("file:///data/in").unwrap(),
            Location::Local(PathBuf::from("/data/in"))
        );
        // A colon without `//` is part of a file name, not a scheme.
        assert_eq!(
            Location::parse("gs:bucket").unwrap(),
            Location::Local(PathBuf::from("gs:bucket"))
        );
    }

    #[test]
    fn s3_urls_are_normalized() {
        let l = Location::parse("s3a://bucket/some/prefix/").unwrap();
        assert_eq!(l.to_string(), "s3://bucket/some/prefix");
        assert_eq!(
            l.join("_autoloader").to_string(),
            "s3://bucket/some/prefix/_autoloader"
        );
        assert_eq!(l.file_name().as_deref(), Some("prefix"));
        let root = Location::parse("s3://bucket").unwrap();
        assert_eq!(root.join("t").to_string(), "s3://bucket/t");
        assert_eq!(root.file_name(), None);
        assert_eq!(root.parent(), None);
        assert_eq!(
            Location::parse("s3://bucket/t/_schemas").unwrap().parent(),
            Some(Location::parse("s3://bucket/t").unwrap())
        );
        assert_eq!(
            Location::parse("s3://bucket/t").unwrap().parent(),
            Some(root.clone())
        );
    }

    #[test]
    fn other_schemes_are_refused_by_name() {
        for (text, scheme) in [
            ("gs://bucket/x", "gs"),
            ("abfss://c@acct.dfs.core.windows.net/x", "abfss"),
            ("az://c/x", "az"),
            ("hdfs://nn/x", "hdfs"),
        ] {
            let err = Location::parse(text).unwrap_err();
            assert!(
                matches!(&err, LocationError::UnsupportedScheme { scheme: s, .. } if s == scheme),
                "{text}: {err}"
            );
            assert!(err.to_string().contains(&format!("{scheme}://")), "{err}");
        }
        assert!(Location::parse("s3:///no-bucket").is_err());
        assert!(Location::parse("").is_err());
    }

    #[test]
    fn relative_locations_resolve_against_a_base() {
        let base = Path::new("/etc/streams");
        assert_eq!(
            Location::parse("bronze/t").unwrap().relative_to(base),
            Location::Local(PathBuf::from("/etc/streams/bronze/t"))
        );
        let s3 = Location::parse("s3://b/t").unwrap();
        assert_eq!(s3.clone().relative_to(base), s3);
        assert_eq!(
            Location::parse("a/./b/../c").unwrap().normalized(),
            Location::Local(PathBuf::from("a/c"))
        );
    }
}
