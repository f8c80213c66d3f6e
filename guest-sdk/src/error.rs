use std::fmt;

/// A transform's error: a message the host shows to the user as is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error(pub String);

/// Result type of [`crate::Transform`] methods.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// An error with this message.
    pub fn msg(message: impl Into<String>) -> Self {
        Error(message.into())
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}

impl From<arrow::error::ArrowError> for Error {
    fn from(e: arrow::error::ArrowError) -> Self {
        Error(format!("arrow: {e}"))
    }
}

impl From<String> for Error {
    fn from(e: String) -> Self {
        Error(e)
    }
}

impl From<&str> for Error {
    fn from(e: &str) -> Self {
        Error(e.to_string())
    }
}

impl From<serde_json::Error> for Error {
    fn from(e: serde_json::Error) -> Self {
        Error(format!("params: {e}"))
    }
}

/// A column name from a transform, as an error shows it: escaped, and cut
/// at 100 characters (names come from the guest).
pub fn show_name(n: &str) -> String {
    let mut v: String = n
        .chars()
        .take(100)
        .collect::<String>()
        .escape_debug()
        .to_string();
    if n.chars().count() > 100 {
        v.push('…');
    }
    v
}
