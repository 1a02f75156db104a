//! The smallest HTTP server on percore: a custom prebuilt response, on all cores.
//!
//! ```text
//! cargo run --release --example hello -- --port 8080 --cpus 0-3
//! ```

use percore::http::{Hello, HelloConfig};

fn main() -> std::process::ExitCode {
    let config = HelloConfig {
        body: b"{\"hello\":\"world\"}\n".to_vec(),
        content_type: "application/json".into(),
        ..HelloConfig::default()
    };
    percore::worker::main(true, move || Ok(Hello::new(&config)))
}
