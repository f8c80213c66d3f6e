//! The connections: hyper's HTTP/1 driven here rather than by
//! `axum::serve`, which has no timeouts. Slow, idle and surplus clients
//! cannot hold the service: connections are capped in all and per peer
//! address, headers (and an idle connection's next request) must arrive
//! within `header-timeout-ms`, a body within `body-timeout-ms`, and a
//! response the client does not take within `write-timeout-ms` closes the
//! connection.

use std::collections::HashMap;
use std::future::Future as _;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Bytes;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::Service;
use super::config::ServeConfig;
use super::session::Peer;

/// Serve until SIGTERM or Ctrl-C: then take no new runs or connections,
/// close idle connections, let open requests answer (for at most
/// `body-timeout-ms`) and return; the workers finish their runs. Prints
/// `listening on ADDR`.
pub async fn serve(svc: Arc<Service>, cfg: &ServeConfig) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind(&cfg.listen).await?;
    println!("listening on {}", listener.local_addr()?);
    let body_timeout = Duration::from_millis(cfg.body_timeout_ms);
    let write_timeout = Duration::from_millis(cfg.write_timeout_ms);
    let app = super::api::router(svc.clone()).layer(axum::middleware::from_fn(
        move |req: axum::extract::Request, next: axum::middleware::Next| {
            next.run(req.map(|b| axum::body::Body::new(Deadline::new(b, body_timeout))))
        },
    ));
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(Duration::from_millis(cfg.header_timeout_ms));
    let slots = Arc::new(tokio::sync::Semaphore::new(cfg.max_connections));
    let peers = Arc::new(Mutex::new(HashMap::new()));
    let (stopping, stop_rx) = tokio::sync::watch::channel(false);
    let mut stop = std::pin::pin!(stop_signal());
    loop {
        let (tcp, addr) = tokio::select! {
            _ = &mut stop => break,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                // Out of file descriptors and the like: wait, go on.
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        // Over either cap: closed at once, unanswered.
        let Some(peer) = PeerSlot::take(&peers, addr.ip(), cfg.max_connections_per_peer) else {
            continue;
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            continue;
        };
        // Each request knows its peer (the page's login back-off counts
        // failures per address).
        let service = hyper_util::service::TowerToHyperService::new(app.clone());
        let ip = addr.ip();
        let conn = http.serve_connection(
            TokioIo::new(Stall::new(tcp, write_timeout)),
            hyper::service::service_fn(move |mut req: hyper::Request<hyper::body::Incoming>| {
                req.extensions_mut().insert(Peer(ip));
                hyper::service::Service::call(&service, req)
            }),
        );
        let mut stop_rx = stop_rx.clone();
        tokio::spawn(async move {
            let _held = (slot, peer);
            let mut conn = std::pin::pin!(conn);
            tokio::select! {
                _ = conn.as_mut() => {}
                _ = stop_rx.changed() => {
                    conn.as_mut().graceful_shutdown();
                    let _ = conn.await;
                }
            }
        });
    }
    drop(listener);
    eprintln!("stopping: no new runs; waiting for the running ones");
    svc.queue.stop();
    let _ = stopping.send(true);
    // Every connection gives its slot back when it ends; one that does
    // not within the body timeout is dropped with the runtime.
    let all = u32::try_from(cfg.max_connections).unwrap_or(u32::MAX);
    let _ = tokio::time::timeout(body_timeout, slots.acquire_many(all)).await;
    Ok(())
}

/// SIGTERM or Ctrl-C.
async fn stop_signal() {
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("installing the SIGTERM handler");
        tokio::select! {
            _ = term.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = tokio::signal::ctrl_c().await;
}

/// One connection of a peer address; counted while held.
struct PeerSlot {
    peers: Arc<Mutex<HashMap<IpAddr, usize>>>,
    ip: IpAddr,
}

impl PeerSlot {
    fn take(peers: &Arc<Mutex<HashMap<IpAddr, usize>>>, ip: IpAddr, max: usize) -> Option<Self> {
        let mut p = peers.lock().unwrap_or_else(|e| e.into_inner());
        let n = p.entry(ip).or_default();
        if *n >= max {
            return None;
        }
        *n += 1;
        Some(PeerSlot {
            peers: peers.clone(),
            ip,
        })
    }
}

impl Drop for PeerSlot {
    fn drop(&mut self) {
        let mut p = self.peers.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = p.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                p.remove(&self.ip);
            }
        }
    }
}

/// A connection whose writes fail once one has made no progress for
/// `timeout`: a client that stops reading (pipelining requests it never
/// takes the answers of) cannot hold its connection forever.
struct Stall<T> {
    io: T,
    timeout: Duration,
    waiting: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl<T> Stall<T> {
    fn new(io: T, timeout: Duration) -> Self {
        Stall {
            io,
            timeout,
            waiting: None,
        }
    }

    fn progress<R>(
        &mut self,
        cx: &mut Context<'_>,
        r: Poll<std::io::Result<R>>,
    ) -> Poll<std::io::Result<R>> {
        if r.is_ready() {
            self.waiting = None;
            return r;
        }
        let timeout = self.timeout;
        let sleep = self
            .waiting
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
        if sleep.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "the client took no response bytes within write-timeout-ms",
            )));
        }
        Poll::Pending
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Stall<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Stall<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let r = Pin::new(&mut self.io).poll_write(cx, buf);
        self.progress(cx, r)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let r = Pin::new(&mut self.io).poll_flush(cx);
        self.progress(cx, r)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let r = Pin::new(&mut self.io).poll_shutdown(cx);
        self.progress(cx, r)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let r = Pin::new(&mut self.io).poll_write_vectored(cx, bufs);
        self.progress(cx, r)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
}

/// A request body that fails once its time is up: a client trickling a
/// body holds a connection (and an upload slot) no longer than that.
struct Deadline {
    inner: axum::body::Body,
    timeout: std::time::Duration,
    sleep: std::pin::Pin<Box<tokio::time::Sleep>>,
}

impl Deadline {
    fn new(inner: axum::body::Body, timeout: std::time::Duration) -> Self {
        Deadline {
            inner,
            timeout,
            sleep: Box::pin(tokio::time::sleep(timeout)),
        }
    }
}

impl http_body::Body for Deadline {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, axum::Error>>> {
        if self.sleep.as_mut().poll(cx).is_ready() {
            let ms = self.timeout.as_millis();
            return std::task::Poll::Ready(Some(Err(axum::Error::new(format!(
                "the request body did not arrive within {ms} ms (body-timeout-ms): send it at once"
            )))));
        }
        std::pin::Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}
