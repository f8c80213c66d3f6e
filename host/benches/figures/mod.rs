pub mod history;
pub mod inputs;
pub mod spark;
