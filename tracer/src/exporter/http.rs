//! The exporter's HTTP side (hyper on tokio, TLS by rustls): `GET /metrics`
//! in the text format Prometheus asks for, `GET /` a page listing the
//! servers. A scrape reads the counts the fleet holds; it takes the
//! fleet's lock only for the map reads, never for an attach.
use std::{
    convert::Infallible,
    sync::{Arc, Mutex},
    time::Duration,
};

use http_body_util::Full;
use hyper::{
    body::{Bytes, Incoming},
    header, Request, Response, StatusCode,
};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

use super::{
    fleet::Fleet,
    metrics::{classic, openmetrics, Exposition, ProcessStats},
    webconfig::WebConfig,
};

const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
const TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// What every connection shares.
pub struct Shared {
    pub fleet: Arc<Mutex<Fleet>>,
    pub web: WebConfig,
    /// Where `POST /window` asks for an exact window.
    pub asks: Arc<super::window::Asks>,
}

/// Whether the scraper asked for OpenMetrics (Prometheus does, first).
fn wants_openmetrics(accept: Option<&str>) -> bool {
    accept.is_some_and(|a| {
        a.split(',').any(|part| {
            let mut it = part.split(';');
            let kind = it.next().unwrap_or("").trim();
            // "q=0" means "not this".
            let refused = it.any(|p| matches!(p.trim(), "q=0" | "q=0.0"));
            kind == "application/openmetrics-text" && !refused
        })
    })
}

fn respond(status: StatusCode, kind: &str, body: String) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = status;
    if let Ok(v) = header::HeaderValue::from_str(kind) {
        r.headers_mut().insert(header::CONTENT_TYPE, v);
    }
    r
}

/// The exposition as of now.
fn scrape(shared: &Shared) -> Exposition {
    let servers = match shared.fleet.lock() {
        Ok(mut f) => {
            f.collect();
            f.views()
        }
        Err(_) => Vec::new(),
    };
    Exposition {
        servers,
        process: ProcessStats::read(),
    }
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn index(shared: &Shared) -> String {
    let servers = shared.fleet.lock().map(|f| f.views()).unwrap_or_default();
    let rows: String = servers
        .iter()
        .map(|s| {
            format!(
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
                escape(&s.name),
                escape(&s.version),
                s.mode,
                escape(&s.fsync_probe),
                if s.attached { "attached" } else { "gone" },
                s.attaches
            )
        })
        .collect();
    format!(
        "<!doctype html>\n<html><head><title>commitscope exporter</title></head><body>\n<h1>commitscope exporter</h1>\n<p><a href=\"/metrics\">/metrics</a></p>\n<table border=\"1\">\n<tr><th>server</th><th>version</th><th>probe mode</th><th>fsync probe</th><th>state</th><th>attaches</th></tr>\n{rows}</table>\n</body></html>\n"
    )
}

async fn handle(
    req: Request<Incoming>,
    shared: Arc<Shared>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let auth = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let web = shared.web.clone();
    // bcrypt takes tens of milliseconds: off the reactor.
    let ok = tokio::task::spawn_blocking(move || web.authorized(auth.as_deref()))
        .await
        .unwrap_or(false);
    if !ok {
        let mut r = respond(StatusCode::UNAUTHORIZED, "text/plain", String::new());
        r.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            header::HeaderValue::from_static("Basic realm=\"commitscope\""),
        );
        return Ok(r);
    }
    // An exact window now, behind the same authentication as /metrics.
    if req.uri().path() == "/window" {
        if req.method() != hyper::Method::POST {
            return Ok(respond(
                StatusCode::METHOD_NOT_ALLOWED,
                "text/plain",
                "POST only\n".into(),
            ));
        }
        return Ok(match shared.asks.ask() {
            Ok(()) => respond(
                StatusCode::ACCEPTED,
                "text/plain",
                "opening an exact window\n".into(),
            ),
            Err(e) => respond(StatusCode::CONFLICT, "text/plain", format!("{e}\n")),
        });
    }
    if req.method() != hyper::Method::GET && req.method() != hyper::Method::HEAD {
        return Ok(respond(
            StatusCode::METHOD_NOT_ALLOWED,
            "text/plain",
            "GET only\n".into(),
        ));
    }
    Ok(match req.uri().path() {
        "/metrics" => {
            let om = wants_openmetrics(
                req.headers()
                    .get(header::ACCEPT)
                    .and_then(|v| v.to_str().ok()),
            );
            let s = shared.clone();
            let text = tokio::task::spawn_blocking(move || openmetrics(scrape(&s)))
                .await
                .unwrap_or_default();
            if om {
                respond(StatusCode::OK, OPENMETRICS, text)
            } else {
                respond(StatusCode::OK, TEXT, classic(&text))
            }
        }
        "/" => respond(StatusCode::OK, "text/html; charset=utf-8", index(&shared)),
        _ => respond(StatusCode::NOT_FOUND, "text/plain", "not found\n".into()),
    })
}

/// Serves until `stop` fires. Each connection is a task of its own; a
/// client that goes away mid-response ends only its own task.
pub async fn serve(
    listener: TcpListener,
    shared: Arc<Shared>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let tls = shared.web.tls.clone().map(tokio_rustls::TlsAcceptor::from);
    loop {
        let (stream, peer) = tokio::select! {
            r = listener.accept() => match r {
                Ok(c) => c,
                Err(e) => {
                    eprintln!("commitscope: accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            _ = stop.changed() => return,
        };
        let shared = shared.clone();
        let tls = tls.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| handle(req, shared.clone()));
            let http = hyper::server::conn::http1::Builder::new();
            let result = match tls {
                Some(acceptor) => {
                    match tokio::time::timeout(Duration::from_secs(10), acceptor.accept(stream))
                        .await
                    {
                        Ok(Ok(s)) => http.serve_connection(TokioIo::new(s), service).await,
                        Ok(Err(e)) => {
                            eprintln!("commitscope: TLS handshake with {peer} failed: {e}");
                            return;
                        }
                        Err(_) => {
                            eprintln!("commitscope: TLS handshake with {peer} timed out");
                            return;
                        }
                    }
                }
                None => http.serve_connection(TokioIo::new(stream), service).await,
            };
            if let Err(e) = result {
                // A scraper that hung up mid-response: its loss only.
                if !e.is_incomplete_message() {
                    eprintln!("commitscope: serving {peer} failed: {e}");
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prometheus_accept_header_asks_for_openmetrics() {
        let prom = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
        assert!(wants_openmetrics(Some(prom)));
        assert!(!wants_openmetrics(Some("text/plain")));
        assert!(!wants_openmetrics(Some("application/openmetrics-text;q=0")));
        assert!(!wants_openmetrics(None));
    }

    #[test]
    fn the_index_escapes_names() {
        assert_eq!(escape("<a&\"b\">"), "&lt;a&amp;&quot;b&quot;&gt;");
    }
}
