//! The smallest HTTP server on percore: a custom prebuilt response, on all cores.
//!
//! ```text
//! cargo run --release --example hello -- --port 8080 --cpus 0-3
//! ```

use percore::http::{Body, Hello, HelloConfig};
use percore::listen::Opening;

fn main() -> std::process::ExitCode {
    let config = HelloConfig {
        body: Body::bytes(&b"{\"hello\":\"world\"}\n"[..]),
        content_type: "application/json".into(),
        ..HelloConfig::default()
    };
    percore::cli::main(Opening::ClientSpeaksFirst, move || Ok(Hello::new(&config)))
}
