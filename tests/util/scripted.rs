//! A server written in the test itself: `ScriptedServer` accepts on an ephemeral
//! loopback port and runs a given function on each connection, in a thread of its
//! own, for the client under test (`percore bench`) to meet canned, odd or hostile
//! answers.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::Duration;

/// Accepts until dropped; each connection runs the server's function, which
/// should end when the client closes (a read of 0 bytes, a failed write) or after a
/// timeout of its own, so that no thread outlives its test for long.
pub struct ScriptedServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    acceptor: Option<JoinHandle<()>>,
}

impl ScriptedServer {
    /// Starts accepting; `serve` runs on every connection.
    pub fn start(serve: impl Fn(TcpStream) + Send + Sync + 'static) -> ScriptedServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("binding a loopback listener");
        let addr = listener.local_addr().expect("a bound listener has an address");
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let serve = Arc::new(serve);
        let acceptor = thread::spawn(move || {
            for stream in listener.incoming() {
                // An accept error is not expected on loopback; stopping rather than
                // retrying cannot spin.
                let Ok(stream) = stream else { break };
                if flag.load(Ordering::SeqCst) {
                    break;
                }
                let serve = Arc::clone(&serve);
                thread::spawn(move || serve(stream));
            }
        });
        ScriptedServer { addr, stop, acceptor: Some(acceptor) }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://ADDR/`.
    pub fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }
}

impl Drop for ScriptedServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the blocking accept so that the loop sees the flag and exits,
        // dropping the listener.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(5));
        if let Some(acceptor) = self.acceptor.take() {
            let _ = acceptor.join();
        }
    }
}
