//! Logs and traces: the `tracing` subscriber every command logs through, and for `serve`
//! the OpenTelemetry export of its spans over OTLP/HTTP when `[telemetry]` or the standard
//! `OTEL_EXPORTER_OTLP_*` variables name a collector.
//!
//! The libraries make the spans (`tools/call` in the MCP front, whose parent is the
//! client's W3C trace context; `registry.call` and `registry.run`; `wasm.invoke`,
//! `sandbox.invoke` and `sandbox.run` in the runtimes; `egress.request` per outbound
//! request); this module only decides where they go. Spans are exported in batches from the
//! batch processor's own thread, so a slow or absent collector never holds a call; the
//! batches left when `serve` stops are flushed by [`Traces::shutdown`] (bounded by the
//! exporter's timeout).

use anyhow::{Context as _, Result};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{WithExportConfig as _, WithHttpConfig as _};
use opentelemetry_sdk::trace::SdkTracerProvider;
use skillhost::config::TelemetrySection;
use tracing_subscriber::Layer as _;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

use crate::cli::LogFormat;

/// The exporter of a serving host's spans; [`shutdown`](Self::shutdown) flushes it.
pub struct Traces {
    provider: SdkTracerProvider,
}

impl Traces {
    /// The exporter `section` (or the environment) asks for; `None` when neither names a
    /// collector.
    pub fn from_config(section: &TelemetrySection) -> Result<Option<Self>> {
        let from_env = ["OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"]
            .iter()
            .any(|name| std::env::var_os(name).is_some_and(|v| !v.is_empty()));
        if section.otlp_endpoint.is_none() && !from_env {
            return Ok(None);
        }
        // The exporter's client is reqwest's, with rustls on the ring provider the host links.
        skillhost::source::http::install_crypto_provider();
        let mut exporter = opentelemetry_otlp::SpanExporter::builder().with_http().with_protocol(opentelemetry_otlp::Protocol::HttpBinary);
        if let Some(endpoint) = &section.otlp_endpoint {
            // The config names the collector; traces go to its standard path.
            exporter = exporter.with_endpoint(format!("{}/v1/traces", endpoint.trim_end_matches('/')));
        }
        let exporter = exporter.with_headers(Default::default()).build().context("cannot set up the OTLP trace exporter")?;
        let service = section
            .service_name
            .clone()
            .or_else(|| std::env::var("OTEL_SERVICE_NAME").ok().filter(|s| !s.is_empty()))
            .unwrap_or_else(|| "skillhost".to_owned());
        let resource = opentelemetry_sdk::Resource::builder()
            .with_service_name(service)
            .with_attribute(opentelemetry::KeyValue::new("service.version", env!("CARGO_PKG_VERSION")))
            .build();
        let provider = SdkTracerProvider::builder().with_batch_exporter(exporter).with_resource(resource).build();
        Ok(Some(Self { provider }))
    }

    /// Export what is still queued and stop. Call it outside the async runtime (the
    /// exporter's client blocks).
    pub fn shutdown(self) {
        if let Err(e) = self.provider.shutdown() {
            tracing::warn!(error = %e, "traces not all exported at exit");
        }
    }
}

/// Install the subscriber: log lines on stderr (text or JSON, filtered by `-v` and
/// `SKILLHOST_LOG`), and the spans of skillhost's own crates to `traces` when given,
/// whatever the log filter lets through. Spans only reach the collector with the W3C
/// trace context propagator installed, so a `traceparent` a client sends is honoured.
pub fn init(verbose: u8, format: LogFormat, traces: Option<&Traces>) {
    let default = match verbose {
        0 => "warn,guest=info",
        1 => "debug",
        _ => "trace",
    };
    let filter =
        tracing_subscriber::EnvFilter::try_from_env("SKILLHOST_LOG").unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    // Colour only for a person at a terminal: an MCP client or a log file gets plain text.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let logs = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    let logs = match format {
        LogFormat::Text => logs.with_ansi(ansi).boxed(),
        LogFormat::Json => logs.json().with_current_span(false).boxed(),
    };
    let spans = traces.map(|traces| {
        opentelemetry::global::set_text_map_propagator(opentelemetry_sdk::propagation::TraceContextPropagator::new());
        let tracer = traces.provider.tracer("skillhost");
        // skillhost's spans, and the warnings and errors logged inside them as their
        // events; never the exporter's own crates (whose logs would be exported again).
        let ours = tracing_subscriber::filter::filter_fn(|meta| {
            meta.target().starts_with("skillhost")
                && (meta.is_span() && *meta.level() <= tracing::Level::INFO || *meta.level() <= tracing::Level::WARN)
        });
        tracing_opentelemetry::layer().with_tracer(tracer).with_filter(ours)
    });
    tracing_subscriber::registry().with(logs.with_filter(filter)).with(spans).init();
}
