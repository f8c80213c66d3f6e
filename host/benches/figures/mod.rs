pub mod history;
pub mod inputs;
