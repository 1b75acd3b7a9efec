//! A TCP relay on a loopback port in front of a server, for failover tests: it forwards every
//! connection to its target until it is cut, which closes its listener and every connection
//! it relays at once, as a client sees a server whose host died (connections reset, new ones
//! refused).

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// A running relay; dropping it cuts it.
pub struct TcpRelay {
    addr: SocketAddr,
    cut: Arc<AtomicBool>,
    streams: Arc<Mutex<Vec<TcpStream>>>,
    acceptor: Option<JoinHandle<()>>,
}

impl TcpRelay {
    /// Relays `127.0.0.1:<some free port>` to `target`.
    pub fn start(target: SocketAddr) -> TcpRelay {
        let listener = TcpListener::bind("127.0.0.1:0")
            .unwrap_or_else(|e| panic!("relay: cannot bind a loopback port: {e}"));
        let addr = listener
            .local_addr()
            .unwrap_or_else(|e| panic!("relay: no local address: {e}"));
        let cut = Arc::new(AtomicBool::new(false));
        let streams = Arc::new(Mutex::new(Vec::new()));
        let acceptor = {
            let (cut, streams) = (cut.clone(), streams.clone());
            std::thread::spawn(move || accept(listener, target, &cut, &streams))
        };
        TcpRelay {
            addr,
            cut,
            streams,
            acceptor: Some(acceptor),
        }
    }

    /// `https://127.0.0.1:PORT` of the relay.
    pub fn url(&self) -> String {
        format!("https://{}", self.addr)
    }

    /// Closes the listening port and every relayed connection; returns once the port is
    /// closed.
    pub fn cut(&mut self) {
        self.cut.store(true, Ordering::SeqCst);
        // Wakes the blocked accept, which then sees the flag and drops the listener.
        let _ = TcpStream::connect(self.addr);
        if let Some(t) = self.acceptor.take() {
            let _ = t.join();
        }
        for s in self
            .streams
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain(..)
        {
            let _ = s.shutdown(Shutdown::Both);
        }
    }
}

impl Drop for TcpRelay {
    fn drop(&mut self) {
        self.cut();
    }
}

fn accept(
    listener: TcpListener,
    target: SocketAddr,
    cut: &AtomicBool,
    streams: &Mutex<Vec<TcpStream>>,
) {
    for incoming in listener.incoming() {
        if cut.load(Ordering::SeqCst) {
            return;
        }
        let Ok(client) = incoming else { continue };
        let Ok(server) = TcpStream::connect(target) else {
            continue;
        };
        let (Ok(c2), Ok(s2), Ok(c3), Ok(s3)) = (
            client.try_clone(),
            server.try_clone(),
            client.try_clone(),
            server.try_clone(),
        ) else {
            continue;
        };
        streams
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend([c3, s3]);
        std::thread::spawn(move || pump(client, server));
        std::thread::spawn(move || pump(s2, c2));
    }
}

/// Copies `from` to `to` until either ends, then ends the other direction's writes.
fn pump(mut from: TcpStream, mut to: TcpStream) {
    let mut buf = [0u8; 16 * 1024];
    loop {
        match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if to.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
        }
    }
    let _ = to.shutdown(Shutdown::Write);
}
