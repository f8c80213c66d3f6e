//! Where a table is, in either format: a user's location (a path, a URL,
//! or an `iceberg+sqlite://` catalog entry) as the table's folder URL, and
//! as a manifest names the table.

use url::Url;

use super::delta;
use super::error::TableError;
use super::iceberg;

/// Turn a user's table location (path or URL) into a URL.
pub fn table_url(location: &str) -> Result<Url, TableError> {
    if iceberg::is_iceberg(location) {
        return Ok(iceberg::Location::parse(location)?.url().clone());
    }
    delta::open::folder_url(location)
}

/// `location` as it may be shown or sent anywhere (logs, lineage job
/// names): a PostgreSQL catalog's password, if one was typed, replaced.
pub fn shown_location(location: &str) -> String {
    iceberg::location::redacted(location)
}

/// How a manifest names the target table at `location` (whose folder is
/// `url`): the folder's URL for Delta, the canonical Iceberg location
/// (catalog file, warehouse, catalog name, table) for Iceberg.
pub fn target_name(location: &str, url: &Url) -> Result<String, TableError> {
    if iceberg::is_iceberg(location) {
        return Ok(iceberg::Location::parse(location)?.canonical());
    }
    Ok(url.to_string())
}
