//! Text of untrusted size (a guest's error strings, trap messages with its
//! function names, log lines and schema names; a request's partition
//! value; a run record read back) is cut before it reaches a message, a
//! run record or a page: a guest can return a 100 MB error. A leaf: every
//! layer that quotes such text calls it.

/// Most bytes of one guest-supplied text kept (a run record keeps this
/// much of a message; a message's own guest texts share
/// [`MESSAGE_SHARE`] of it, so its fix, which comes last, survives).
pub const MAX_GUEST_TEXT: usize = 4_096;

/// What the guest's texts in one error message may take together.
pub const MESSAGE_SHARE: usize = 2_048;

/// Most error lines of the guest's log quoted with a trap.
pub const MAX_QUOTED_LINES: usize = 4;

/// `text` cut to at most `max` bytes (on a character boundary), saying how
/// many bytes were cut; unchanged when it fits.
pub fn clip(text: String, max: usize) -> String {
    if text.len() <= max {
        return text;
    }
    clip_str(&text, max)
}

/// [`clip`] of borrowed text: only the kept prefix is copied.
pub fn clip_str(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut cut = max;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}… [{} more bytes cut]", &text[..cut], text.len() - cut)
}

/// Untrusted `text` as a message quotes it: clipped to `max` bytes, then
/// control characters escaped (a row's value, a header's name).
pub fn shown(text: &str, max: usize) -> String {
    clip_str(text, max).escape_debug().to_string()
}

/// The last [`MAX_QUOTED_LINES`] of `lines`, each clipped, saying how many
/// earlier lines were left out.
pub fn quote_lines(lines: Vec<String>) -> Vec<String> {
    let skipped = lines.len().saturating_sub(MAX_QUOTED_LINES);
    let mut out: Vec<String> = Vec::with_capacity(MAX_QUOTED_LINES + 1);
    if skipped > 0 {
        out.push(format!("[{skipped} earlier lines left out]"));
    }
    out.extend(
        lines
            .into_iter()
            .skip(skipped)
            .map(|l| clip(l, MESSAGE_SHARE / 2 / MAX_QUOTED_LINES)),
    );
    out
}

/// An error and its causes, outermost first, joined by `: ` (what the
/// CLI prints after `error: `, and the Python exceptions' text); a cause
/// the message so far already ends with (an error that prints its source,
/// as many do) is not said twice.
pub fn message_of(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let part = c.to_string();
        if !part.is_empty() && !out.ends_with(&part) {
            if !out.is_empty() {
                out.push_str(": ");
            }
            out.push_str(&part);
        }
        cause = c.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_text_is_cut_on_a_character_boundary_saying_how_much() {
        assert_eq!(clip("short".into(), 10), "short");
        let cut = clip("é".repeat(10), 5);
        assert_eq!(cut, "éé… [16 more bytes cut]");
        let big = clip("E".repeat(100_000_000), MAX_GUEST_TEXT);
        assert!(big.len() < MAX_GUEST_TEXT + 40, "{}", big.len());
        assert!(
            big.ends_with("… [99995904 more bytes cut]"),
            "{}",
            &big[4000..]
        );
    }

    #[test]
    fn only_the_last_lines_are_quoted() {
        let lines: Vec<String> = (0..1000)
            .map(|i| format!("{i}{}", "x".repeat(5000)))
            .collect();
        let q = quote_lines(lines);
        assert_eq!(q.len(), MAX_QUOTED_LINES + 1);
        assert_eq!(q[0], "[996 earlier lines left out]");
        assert!(q[1].starts_with("996x"));
        assert!(q.iter().map(String::len).sum::<usize>() < MESSAGE_SHARE);
        assert_eq!(quote_lines(vec!["a".into()]), vec!["a".to_string()]);
    }

    #[test]
    fn a_cause_the_message_already_ends_with_is_said_once() {
        #[derive(Debug)]
        struct Outer(std::io::Error);
        impl std::fmt::Display for Outer {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "reading module m.wasm: {}", self.0)
            }
        }
        impl std::error::Error for Outer {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&self.0)
            }
        }
        let missing = std::io::Error::other("`m.wasm` does not exist");
        assert_eq!(
            message_of(&Outer(missing)),
            "reading module m.wasm: `m.wasm` does not exist"
        );
        let e = anyhow::Error::new(std::io::Error::other("disk full"))
            .context("writing disk full.parquet");
        assert_eq!(
            message_of(e.as_ref()),
            "writing disk full.parquet: disk full"
        );
    }
}
