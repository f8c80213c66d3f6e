//! Messages as a tenant sees them: objects named relative to its root,
//! never the host's folders. A message from a run or an audit names
//! objects by their full location (a path, a `file://` URL, a store URL);
//! each whole occurrence of the tenant's root (resolved, as a URL, and as
//! configured) becomes nothing, so `<root>/orders/x` reads `orders/x`,
//! and any absolute host path left after that is masked.

/// What an absolute host path that is not below the tenant's root reads
/// as.
pub const MASK: &str = "<host path>";

/// The spellings of one tenant's root a message may hold, longest first
/// (so a URL is taken whole before the path inside it).
#[derive(Debug, Clone)]
pub struct RootNames {
    names: Vec<String>,
}

impl RootNames {
    /// The spellings of a root `configured` as written in the config (made
    /// absolute) that resolved to the directory URL `resolved`.
    pub fn new(configured: &str, resolved: &url::Url) -> RootNames {
        let mut names = vec![
            resolved.as_str().trim_end_matches('/').to_string(),
            configured.trim_end_matches('/').to_string(),
        ];
        if let Ok(p) = resolved.to_file_path() {
            names.push(p.display().to_string().trim_end_matches('/').to_string());
        }
        // A local root as configured may also show as a URL (its
        // spelling, unresolved).
        if configured.starts_with('/') {
            names.push(format!("file://{}", configured.trim_end_matches('/')));
        }
        names.retain(|n| !n.is_empty() && n != "/" && n != "file://");
        names.sort_by_key(|n| std::cmp::Reverse(n.len()));
        names.dedup();
        RootNames { names }
    }

    /// `m` with every whole occurrence of the root taken out (`<root>/x`
    /// reads `x`, the root itself `.`), then every other absolute host path
    /// or `file://` URL masked.
    pub fn scrub(&self, m: &str) -> String {
        let mut out = m.to_string();
        for name in &self.names {
            out = strip_root(&out, name);
        }
        mask_host_paths(&out)
    }
}

/// A character that can be part of a path or URL, so a name next to it
/// is part of a longer one (`/srv/a` in `/srv/ab` or `x/srv/a`).
fn path_char(c: char) -> bool {
    c.is_alphanumeric() || "/._-~%+@".contains(c)
}

/// `m` with the whole occurrences of `root` removed: preceded by no path
/// character and followed by `/` (removed with it) or by none (`.`).
fn strip_root(m: &str, root: &str) -> String {
    let mut out = String::with_capacity(m.len());
    let mut rest = m;
    // The character of `m` just before `rest`.
    let mut prev: Option<char> = None;
    while let Some(i) = rest.find(root) {
        let anchored = rest[..i]
            .chars()
            .last()
            .or(prev)
            .is_none_or(|c| !path_char(c));
        let after = &rest[i + root.len()..];
        match after.chars().next() {
            Some('/') if anchored => {
                out.push_str(&rest[..i]);
                // `<root>//x` is `x` too.
                rest = after.trim_start_matches('/');
                prev = Some('/');
                if rest.chars().next().is_none_or(|c| !path_char(c)) {
                    out.push('.');
                }
            }
            c if anchored && c.is_none_or(|c| !path_char(c)) => {
                out.push_str(&rest[..i]);
                out.push('.');
                rest = after;
                prev = root.chars().last();
            }
            _ => {
                // Part of a longer name: keep it, look further.
                let step = i + root.chars().next().map_or(1, char::len_utf8);
                out.push_str(&rest[..step]);
                prev = rest[..step].chars().last();
                rest = &rest[step..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// Where a path or URL that starts at byte `i` of `m` ends: at
/// whitespace, a quote or bracket, a comma or semicolon, or a colon
/// followed by a space (`/x/y: No such file`).
fn token_end(m: &str, i: usize) -> usize {
    let mut chars = m[i..].char_indices().peekable();
    while let Some((k, c)) = chars.next() {
        let next = chars.peek().map(|(_, n)| *n);
        let stop = c.is_whitespace()
            || "\"'`()[]<>{},;".contains(c)
            || (c == ':' && next.is_none_or(char::is_whitespace));
        if stop {
            return i + k;
        }
    }
    m.len()
}

/// `m` with every absolute host path (a `/` that starts a word and is
/// followed by a path character) and `file://` URL masked.
fn mask_host_paths(m: &str) -> String {
    let mut out = String::with_capacity(m.len());
    let mut i = 0;
    while i < m.len() {
        let rest = &m[i..];
        let before = m[..i].chars().last();
        let starts_word = before.is_none_or(|c| !path_char(c) && c != ':');
        let url = rest.starts_with("file:/") && before.is_none_or(|c| !path_char(c));
        let path = starts_word
            && rest.starts_with('/')
            && rest[1..]
                .chars()
                .next()
                .is_some_and(|c| path_char(c) && c != '/');
        if url || path {
            let end = token_end(m, i);
            out.push_str(MASK);
            i = end.max(i + 1);
            continue;
        }
        let c = rest.chars().next().unwrap_or(' ');
        out.push(c);
        i += c.len_utf8();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(configured: &str, resolved: &str) -> RootNames {
        RootNames::new(configured, &url::Url::parse(resolved).unwrap())
    }

    #[test]
    fn paths_below_an_absolute_root_read_relative_and_intact() {
        let r = names("/srv/idem/./b", "file:///srv/idem/b/");
        assert_eq!(
            r.scrub("cannot create /srv/idem/b/orders/date=2026-10-01/part-00000.parquet/t: Not a directory (os error 20)"),
            "cannot create orders/date=2026-10-01/part-00000.parquet/t: Not a directory (os error 20)"
        );
        assert_eq!(
            r.scrub("the table file:///srv/idem/b/tables/b/t/ lies inside the input file:///srv/idem/b/orders/"),
            "the table tables/b/t/ lies inside the input orders/"
        );
        // As configured (unresolved), and as that spelling's URL.
        assert_eq!(r.scrub("`/srv/idem/./b/x/b/y`"), "`x/b/y`");
        assert_eq!(r.scrub("file:///srv/idem/./b/x"), "x");
        // The root itself.
        assert_eq!(
            r.scrub("cannot list /srv/idem/b: gone"),
            "cannot list .: gone"
        );
        assert_eq!(r.scrub("at /srv/idem/b/"), "at .");
    }

    #[test]
    fn a_relative_root_is_taken_out_only_where_it_starts_a_path() {
        let r = names("b", "file:///srv/idem/b/");
        assert_eq!(
            r.scrub("b/orders/x and web/b/c and sub/b/x, job b/"),
            "orders/x and web/b/c and sub/b/x, job ."
        );
        assert_eq!(
            r.scrub("reading /srv/idem/b/orders/date=1/b/part.parquet"),
            "reading orders/date=1/b/part.parquet"
        );
    }

    #[test]
    fn trailing_slashes_and_encoded_urls_are_the_same_root() {
        let r = names("/srv/my root/a/", "file:///srv/my%20root/a/");
        assert_eq!(r.scrub("file:///srv/my%20root/a/t/x"), "t/x");
        assert_eq!(r.scrub("\"/srv/my root/a/t\""), "\"t\"");
        assert_eq!(r.scrub("/srv/my root/a//t"), "t");
    }

    #[test]
    fn a_root_that_is_a_prefix_of_another_name_is_not_taken_out_of_it() {
        let r = names("/srv/a", "file:///srv/a/");
        // `/srv/ab` is another folder: masked as a host path, not cut.
        assert_eq!(
            r.scrub("see /srv/ab/x and /srv/a/x"),
            format!("see {MASK} and x")
        );
        assert_eq!(r.scrub("file:///srv/abc/y"), MASK);
        let s3 = names("s3://lake/c", "s3://lake/c/");
        assert_eq!(
            s3.scrub("s3://lake/c/tables/t and s3://lake/cc/t"),
            "tables/t and s3://lake/cc/t"
        );
    }

    #[test]
    fn other_host_paths_are_masked_and_other_text_kept() {
        let r = names("/srv/a", "file:///srv/a/");
        assert_eq!(
            r.scrub("cannot open /etc/passwd: denied; (/var/tmp/x) rows/s 1/2 a / b"),
            format!("cannot open {MASK}: denied; ({MASK}) rows/s 1/2 a / b")
        );
        assert_eq!(
            r.scrub("relative orders/x stays"),
            "relative orders/x stays"
        );
        assert_eq!(r.scrub("é/x é /y"), format!("é/x é {MASK}"));
    }
}
