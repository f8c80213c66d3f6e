//! Support code for [`crate::export!`]; not a stable API.

#[cfg(target_arch = "wasm32")]
pub use wit_bindgen;

#[cfg(target_arch = "wasm32")]
mod wasm {
    use std::cell::RefCell;
    use std::sync::Once;

    use crate::bindings::exports::idem::transform::transform::Context as WitContext;
    use crate::{Context, Error, Level, Transform, ipc, log};

    static PANIC_HOOK: Once = Once::new();

    std::thread_local! {
        /// Side inputs as they arrive, before `open` takes them.
        static SIDES: RefCell<crate::SideInputs> = RefCell::new(crate::SideInputs::default());
    }

    /// One batch of a side input (every one comes before `open`).
    pub fn side_input(name: String, batch: Vec<u8>) -> Result<(), String> {
        install_panic_hook();
        let batch = ipc::decode_trusted(batch)
            .map_err(|e| format!("side input `{}`: {e}", crate::error::show_name(&name)))?
            .ok_or_else(|| {
                format!(
                    "side input `{}`: a stream without a batch",
                    crate::error::show_name(&name)
                )
            })?;
        SIDES
            .with(|s| s.borrow_mut().push(&name, batch))
            .map_err(err)
    }

    /// With panic=abort a panic is a bare `unreachable` trap; send the
    /// message to the host first so it can show it next to the trap.
    pub fn install_panic_hook() {
        PANIC_HOOK.call_once(|| {
            std::panic::set_hook(Box::new(|info| {
                let message = format!("guest panicked: {info}");
                log(Level::Error, &message);
                // std's answer to SystemTime/Instant::now() here: say why,
                // and what to use (as the JavaScript and Python SDKs do), on
                // a line of its own (the host quotes the last lines whole).
                if message.contains("time not implemented on this platform") {
                    log(
                        Level::Error,
                        "idem runs transforms without a clock (a rerun must compute the same output): use ctx.logical_date, not SystemTime/Instant::now()",
                    );
                }
            }));
        });
    }

    fn err(e: Error) -> String {
        e.0
    }

    pub fn open<T: Transform>(
        state: &RefCell<Option<T>>,
        ctx: WitContext,
    ) -> Result<Option<Vec<String>>, String> {
        install_panic_hook();
        let mut params = if ctx.params.trim().is_empty() {
            serde_json::Value::Object(Default::default())
        } else {
            serde_json::from_str(&ctx.params).map_err(|e| format!("params are not JSON: {e}"))?
        };
        // Before `open`, so a misspelled or ill-typed param fails the run
        // by name instead of being ignored.
        crate::params::apply::<T>(&mut params).map_err(err)?;
        let input_schema =
            ipc::decode_schema(&ctx.input_schema).map_err(|e| format!("input schema: {e}"))?;
        let ctx = Context {
            slice_id: ctx.slice_id,
            logical_date: ctx.logical_date,
            params,
            input_schema,
            batch_rows: ctx.batch_rows,
            side_inputs: SIDES.with(|s| std::mem::take(&mut *s.borrow_mut())),
        };
        let mut t = T::default();
        t.open(&ctx).map_err(err)?;
        let columns = t.columns();
        *state.borrow_mut() = Some(t);
        Ok(columns)
    }

    pub fn push<T: Transform>(
        state: &RefCell<Option<T>>,
        batch: Vec<u8>,
    ) -> Result<Vec<u8>, String> {
        let mut guard = state.borrow_mut();
        let t = guard.as_mut().ok_or("push before open")?;
        let Some(batch) = ipc::decode_trusted(batch).map_err(|e| format!("input batch: {e}"))?
        else {
            return Ok(Vec::new());
        };
        let out = t.push(batch).map_err(err)?;
        ipc::encode(out.as_ref()).map_err(|e| format!("output batch: {e}"))
    }

    /// Before `open` (a host never asks then) no column is taken encoded.
    pub fn dictionary_columns<T: Transform>(state: &RefCell<Option<T>>) -> Vec<String> {
        state
            .borrow()
            .as_ref()
            .map(|t| t.dictionary_columns())
            .unwrap_or_default()
    }

    pub fn finish<T: Transform>(state: &RefCell<Option<T>>) -> Result<Vec<u8>, String> {
        let mut guard = state.borrow_mut();
        let t = guard.as_mut().ok_or("finish before open")?;
        let out = t.finish().map_err(err)?;
        ipc::encode(out.as_ref()).map_err(|e| format!("output batch: {e}"))
    }
}

#[cfg(target_arch = "wasm32")]
pub use wasm::*;
