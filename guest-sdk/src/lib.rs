//! `idem-guest`: write an idem transform as plain Rust over Arrow
//! [`RecordBatch`]es, then export it to the `idem:transform` WIT world with
//! [`export!`].
//!
//! ```
//! use idem_guest::arrow::record_batch::RecordBatch;
//!
//! #[derive(Default)]
//! struct Passthrough;
//! impl idem_guest::Transform for Passthrough {
//!     fn push(&mut self, batch: RecordBatch) -> idem_guest::Result<Option<RecordBatch>> {
//!         Ok(Some(batch))
//!     }
//! }
//! idem_guest::export!(Passthrough);
//! ```
//!
//! The same crate builds natively (as an `rlib`) so a transform can be unit
//! tested and benchmarked without a sandbox: see [`native`].

// Lets the generated bindings name this crate by its public path.
extern crate self as idem_guest;

pub use arrow;
pub use serde_json;

mod context;
mod error;
pub mod ipc;
pub mod native;
pub mod params;

#[doc(hidden)]
pub mod __private;

pub use context::{Context, MAX_SIDE_INPUTS, SideInputs};
pub use error::{Error, Result};
pub use params::{Param, ParamType};

use arrow::record_batch::RecordBatch;

/// A data transform. One value lives for one run: `open` once, `push` for
/// every input batch in a fixed order, `finish` once.
///
/// State kept across batches (dedup sets, aggregates) is deterministic
/// because batches always arrive in the same order and size. Anything
/// emitted from a hash map must be emitted in a defined (sorted) order: hash
/// iteration order differs between builds.
pub trait Transform: Default + 'static {
    /// The params this transform takes, or `None` (the default): any
    /// params object is then passed to `open` as given. With a declaration
    /// the SDK checks `ctx.params` before `open` (see [`params::check`]):
    /// an undeclared key (a typo), a value of another type or a missing
    /// required param fails the run naming it, and the defaults are filled
    /// in, so `ctx.param_f64("min_amount")` returns the default. An
    /// associated function, not a method: it is asked before `open`.
    ///
    /// ```
    /// # use idem_guest::{Param, Transform, Result, arrow::array::RecordBatch};
    /// # #[derive(Default)] struct CleanOrders;
    /// impl Transform for CleanOrders {
    ///     fn params() -> Option<Vec<Param>> {
    ///         Some(vec![Param::number("min_amount").default(0.0)])
    ///     }
    ///     # fn push(&mut self, b: RecordBatch) -> Result<Option<RecordBatch>> { Ok(Some(b)) }
    /// }
    /// ```
    fn params() -> Option<Vec<Param>> {
        None
    }

    /// Called once before the first batch; read parameters here.
    fn open(&mut self, ctx: &Context) -> Result<()> {
        let _ = ctx;
        Ok(())
    }

    /// Transform one input batch. `None` (or a batch with no rows) emits nothing.
    fn push(&mut self, batch: RecordBatch) -> Result<Option<RecordBatch>>;

    /// Called once after the last batch; emit buffered rows or aggregates.
    fn finish(&mut self) -> Result<Option<RecordBatch>> {
        Ok(None)
    }

    /// The input columns this transform reads, by name, asked right after
    /// [`Transform::open`]; `None` (the default) reads all of them. Batches
    /// then hold exactly these columns, in this order, and the host decodes
    /// nothing else: an aggregate over 3 of 20 columns reads 3. A column
    /// the input lacks fails the run, naming it.
    fn columns(&self) -> Option<Vec<String>> {
        None
    }

    /// Of the columns read, the string or binary ones this transform takes
    /// dictionary-encoded, asked right after [`Transform::columns`]: each
    /// batch then holds them as `Dictionary(Int32, Utf8)` (or `Binary`),
    /// whatever the file's encoding. A group-by or a lookup then works
    /// once per distinct value of a batch instead of once per row.
    /// A dictionary may hold values no row uses, in any order, a value
    /// under two keys: the output must depend on the values only.
    /// The default takes none.
    fn dictionary_columns(&self) -> Vec<String> {
        Vec::new()
    }
}

/// Severity of a [`log`] line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// Verbose detail.
    Debug,
    /// Normal progress.
    Info,
    /// Something odd that did not stop the run.
    Warn,
    /// Something failed; the host shows error lines next to a trap.
    Error,
}

/// Write a line to the host's run log. It is never hashed: logging does not
/// change a run's output digest.
pub fn log(level: Level, message: &str) {
    #[cfg(target_arch = "wasm32")]
    {
        use bindings::idem::transform::host;
        let level = match level {
            Level::Debug => host::Level::Debug,
            Level::Info => host::Level::Info,
            Level::Warn => host::Level::Warn,
            Level::Error => host::Level::Error,
        };
        host::log(level, message);
    }
    #[cfg(not(target_arch = "wasm32"))]
    native::log(level, message);
}

/// Make a guest panic visible: with panic=abort a panic is a bare
/// `unreachable` trap, so the hook sends the message to the host log first.
/// [`export!`] installs it; raw guests call it from `open`.
pub fn install_panic_hook() {
    #[cfg(target_arch = "wasm32")]
    __private::install_panic_hook();
}

/// Raw bindings of the `idem:transform` world (wasm32 only). Most guests
/// never touch these; [`export!`] wires a [`Transform`] to them.
#[cfg(target_arch = "wasm32")]
pub mod bindings {
    wit_bindgen::generate!({
        path: "../wit",
        world: "transform-world-encoded",
        pub_export_macro: true,
        export_macro_name: "export_world",
        default_bindings_module: "idem_guest::bindings",
        runtime_path: "idem_guest::__private::wit_bindgen::rt",
    });
}

/// Export a [`Transform`] as the guest's `idem:transform/transform`
/// implementation. On native targets it expands to nothing, so the same
/// crate also builds as a plain library for tests and benchmarks.
#[macro_export]
macro_rules! export {
    ($t:ty) => {
        #[cfg(target_arch = "wasm32")]
        const _: () = {
            use $crate::bindings::exports::idem::transform::transform as __idem_world;
            ::std::thread_local! {
                static __IDEM_STATE: ::core::cell::RefCell<::core::option::Option<$t>> =
                    const { ::core::cell::RefCell::new(::core::option::Option::None) };
            }
            struct __IdemGuest;
            impl __idem_world::Guest for __IdemGuest {
                fn open(
                    ctx: __idem_world::Context,
                ) -> ::core::result::Result<
                    ::core::option::Option<::std::vec::Vec<::std::string::String>>,
                    ::std::string::String,
                > {
                    __IDEM_STATE.with(|s| $crate::__private::open::<$t>(s, ctx))
                }
                fn push(
                    batch: ::std::vec::Vec<u8>,
                ) -> ::core::result::Result<::std::vec::Vec<u8>, ::std::string::String> {
                    __IDEM_STATE.with(|s| $crate::__private::push::<$t>(s, batch))
                }
                fn finish() -> ::core::result::Result<::std::vec::Vec<u8>, ::std::string::String> {
                    __IDEM_STATE.with(|s| $crate::__private::finish::<$t>(s))
                }
            }
            impl $crate::bindings::exports::idem::transform::side_inputs::Guest for __IdemGuest {
                fn side_input(
                    name: ::std::string::String,
                    batch: ::std::vec::Vec<u8>,
                ) -> ::core::result::Result<(), ::std::string::String> {
                    $crate::__private::side_input(name, batch)
                }
            }
            impl $crate::bindings::exports::idem::transform::input_encoding::Guest for __IdemGuest {
                fn dictionary_columns() -> ::std::vec::Vec<::std::string::String> {
                    __IDEM_STATE.with(|s| $crate::__private::dictionary_columns::<$t>(s))
                }
            }
    $crate::bindings::export_world!(__IdemGuest with_types_in $crate::bindings);
        };
    };
}
