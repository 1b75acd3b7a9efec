//! The cluster DNS server: hickory's UDP and TCP listeners, answering cluster names from the
//! current [`Records`] (swapped whole through a watch channel) and forwarding every other name
//! to the host's resolvers through hickory's resolver, whose cache keeps repeated questions
//! off the upstream servers.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use hickory_resolver::TokioResolver;
use hickory_resolver::config::{
    ConnectionConfig, NameServerConfig, ResolveHosts, ResolverConfig, ResolverOpts,
};
use hickory_resolver::net::runtime::TokioRuntimeProvider;
use hickory_resolver::net::{DnsError, NetError};
use hickory_server::Server;
use hickory_server::net::runtime::Time;
use hickory_server::proto::op::{Edns, MessageType, Metadata, OpCode, ResponseCode};
use hickory_server::proto::rr::rdata::{A, CNAME, NS, PTR, SOA, SRV};
use hickory_server::proto::rr::{Name, RData, Record, RecordType};
use hickory_server::server::{Request, RequestHandler, ResponseHandler, ResponseInfo};
use hickory_server::zone_handler::MessageResponseBuilder;
use tokio::net::{TcpListener, UdpSocket};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::records::{self, Lookup, QueryType, Rcode, Records};

/// How long an idle TCP connection is kept.
const TCP_TIMEOUT: Duration = Duration::from_secs(10);
/// Upstream answers are cached at most this long (CoreDNS's stock `cache 30`).
const MAX_CACHE_TTL: Duration = Duration::from_secs(30);

/// The forwarder: hickory's resolver over the host's name servers, caching.
pub struct Forwarder {
    resolver: Option<TokioResolver>,
}

impl Forwarder {
    /// A forwarder to `upstreams` (none: every forwarded question fails with SERVFAIL).
    pub fn new(upstreams: &[SocketAddr]) -> Forwarder {
        if upstreams.is_empty() {
            return Forwarder { resolver: None };
        }
        let servers = upstreams
            .iter()
            .map(|addr| {
                let mut udp = ConnectionConfig::udp();
                udp.port = addr.port();
                let mut tcp = ConnectionConfig::tcp();
                tcp.port = addr.port();
                NameServerConfig::new(addr.ip(), true, vec![udp, tcp])
            })
            .collect();
        let mut builder = TokioResolver::builder_with_config(
            ResolverConfig::from_name_servers(servers),
            TokioRuntimeProvider::default(),
        );
        let opts: &mut ResolverOpts = builder.options_mut();
        opts.use_hosts_file = ResolveHosts::Never;
        // A forwarder passes on the whole chain (RFC 1034 4.3.2).
        opts.preserve_intermediates = true;
        opts.timeout = Duration::from_secs(2);
        opts.attempts = 2;
        opts.positive_max_ttl = Some(MAX_CACHE_TTL);
        opts.negative_max_ttl = Some(MAX_CACHE_TTL);
        match builder.build() {
            Ok(resolver) => Forwarder {
                resolver: Some(resolver),
            },
            Err(e) => {
                tracing::warn!(error = %e, "cluster DNS: no forwarder");
                Forwarder { resolver: None }
            }
        }
    }

    /// The upstream answer: response code, answers, authority records.
    async fn resolve(&self, name: Name, qtype: RecordType) -> Forwarded {
        let Some(resolver) = &self.resolver else {
            return Forwarded::failed(ResponseCode::ServFail);
        };
        match resolver.lookup(name, qtype).await {
            Ok(lookup) => Forwarded {
                rcode: ResponseCode::NoError,
                answers: lookup.answers().to_vec(),
                authority: lookup.authorities().to_vec(),
            },
            Err(NetError::Dns(DnsError::NoRecordsFound(none))) => Forwarded {
                rcode: none.response_code,
                answers: Vec::new(),
                authority: none
                    .soa
                    .map(|soa| vec![soa.into_record_of_rdata()])
                    .unwrap_or_default(),
            },
            Err(NetError::Dns(DnsError::ResponseCode(rcode))) => Forwarded::failed(rcode),
            Err(e) => {
                tracing::debug!(error = %e, "cluster DNS: forwarding failed");
                Forwarded::failed(ResponseCode::ServFail)
            }
        }
    }
}

/// What the upstream servers said.
struct Forwarded {
    rcode: ResponseCode,
    answers: Vec<Record>,
    authority: Vec<Record>,
}

impl Forwarded {
    fn failed(rcode: ResponseCode) -> Forwarded {
        Forwarded {
            rcode,
            answers: Vec::new(),
            authority: Vec::new(),
        }
    }
}

/// Answers questions: cluster names from the records, the rest through the forwarder.
pub struct Handler {
    records: watch::Receiver<Arc<Records>>,
    forwarder: Forwarder,
}

impl Handler {
    pub fn new(records: watch::Receiver<Arc<Records>>, forwarder: Forwarder) -> Handler {
        Handler { records, forwarder }
    }
}

fn query_type(t: RecordType) -> QueryType {
    match t {
        RecordType::A => QueryType::A,
        RecordType::AAAA => QueryType::Aaaa,
        RecordType::CNAME => QueryType::Cname,
        RecordType::SRV => QueryType::Srv,
        RecordType::PTR => QueryType::Ptr,
        RecordType::NS => QueryType::Ns,
        RecordType::SOA => QueryType::Soa,
        RecordType::ANY => QueryType::Any,
        _ => QueryType::Other,
    }
}

fn name(n: &str) -> Result<Name, ResponseCode> {
    let mut name = Name::from_ascii(n).map_err(|_| ResponseCode::ServFail)?;
    name.set_fqdn(true);
    Ok(name)
}

/// A planned record as hickory's.
fn to_record(r: &records::Record) -> Result<Record, ResponseCode> {
    let data = match &r.data {
        records::Data::A(ip) => RData::A(A(*ip)),
        records::Data::Cname(t) => RData::CNAME(CNAME(name(t)?)),
        records::Data::Ptr(t) => RData::PTR(PTR(name(t)?)),
        records::Data::Ns(t) => RData::NS(NS(name(t)?)),
        records::Data::Srv {
            priority,
            weight,
            port,
            target,
        } => RData::SRV(SRV::new(*priority, *weight, *port, name(target)?)),
        records::Data::Soa(s) => RData::SOA(SOA::new(
            name(&s.mname)?,
            name(&s.rname)?,
            s.serial,
            s.refresh,
            s.retry,
            s.expire,
            s.minimum,
        )),
    };
    Ok(Record::from_rdata(name(&r.name)?, r.ttl, data))
}

fn to_records(list: &[records::Record]) -> Result<Vec<Record>, ResponseCode> {
    list.iter().map(to_record).collect()
}

/// The sections of a response.
struct Sections {
    rcode: ResponseCode,
    authoritative: bool,
    answers: Vec<Record>,
    authority: Vec<Record>,
    additionals: Vec<Record>,
}

impl Sections {
    fn failed(rcode: ResponseCode) -> Sections {
        Sections {
            rcode,
            authoritative: false,
            answers: Vec::new(),
            authority: Vec::new(),
            additionals: Vec::new(),
        }
    }
}

impl Handler {
    async fn answer(&self, qname: &Name, qtype: RecordType) -> Sections {
        // Clone the table out of the channel: no lock is held across the forwarding below.
        let table = self.records.borrow().clone();
        match table.lookup(&qname.to_ascii(), query_type(qtype)) {
            Lookup::Forward => {
                let f = self.forwarder.resolve(qname.clone(), qtype).await;
                Sections {
                    rcode: f.rcode,
                    authoritative: false,
                    answers: f.answers,
                    authority: f.authority,
                    additionals: Vec::new(),
                }
            }
            Lookup::Unavailable => Sections::failed(ResponseCode::ServFail),
            Lookup::Answer(reply) => match self.reply(reply, qtype).await {
                Ok(s) => s,
                Err(rcode) => Sections::failed(rcode),
            },
        }
    }

    async fn reply(
        &self,
        reply: records::Reply,
        qtype: RecordType,
    ) -> Result<Sections, ResponseCode> {
        let mut answers = to_records(&reply.answers)?;
        if let Some(target) = &reply.chase {
            // An ExternalName's target: its addresses come from upstream, as CoreDNS adds them.
            let f = self.forwarder.resolve(name(target)?, qtype).await;
            answers.extend(f.answers);
        }
        Ok(Sections {
            rcode: match reply.rcode {
                Rcode::NoError => ResponseCode::NoError,
                Rcode::NxDomain => ResponseCode::NXDomain,
            },
            authoritative: true,
            answers,
            authority: to_records(&reply.authority)?,
            additionals: to_records(&reply.additionals)?,
        })
    }
}

#[async_trait::async_trait]
impl RequestHandler for Handler {
    async fn handle_request<R: ResponseHandler, T: Time>(
        &self,
        request: &Request,
        mut response_handle: R,
    ) -> ResponseInfo {
        let edns = request.edns.as_ref().map(|req| {
            let mut e = Edns::new();
            e.set_max_payload(req.max_payload().max(512));
            e.set_version(0);
            e
        });
        let sections = if request.metadata.message_type != MessageType::Query {
            Sections::failed(ResponseCode::FormErr)
        } else if request.metadata.op_code != OpCode::Query {
            Sections::failed(ResponseCode::NotImp)
        } else if let Ok(info) = request.request_info() {
            let query = info.query.original();
            self.answer(query.name(), query.query_type()).await
        } else {
            Sections::failed(ResponseCode::FormErr)
        };
        let mut metadata = Metadata::response_from_request(&request.metadata);
        metadata.response_code = sections.rcode;
        metadata.authoritative = sections.authoritative;
        metadata.recursion_available = true;
        let response = MessageResponseBuilder::new(&request.queries, edns.as_ref()).build(
            metadata,
            sections.answers.iter(),
            sections.authority.iter(),
            std::iter::empty(),
            sections.additionals.iter(),
        );
        match response_handle.send_response(response).await {
            Ok(info) => info,
            Err(e) => {
                tracing::debug!(error = %e, "cluster DNS: sending a response failed");
                let mut failed = Metadata::response_from_request(&request.metadata);
                failed.response_code = ResponseCode::ServFail;
                ResponseInfo::from(hickory_server::proto::op::Header {
                    metadata: failed,
                    counts: Default::default(),
                })
            }
        }
    }
}

/// The UDP socket and TCP listener of one address.
pub struct Listeners {
    udp: UdpSocket,
    tcp: TcpListener,
}

impl Listeners {
    /// Binds UDP and TCP on `addr` (port 0: one free port for both).
    pub async fn bind(addr: SocketAddr) -> std::io::Result<Listeners> {
        // With port 0 the kernel picks a free UDP port, which some TCP socket may hold: then
        // another pick, a few times over.
        let attempts = if addr.port() == 0 { 16 } else { 1 };
        let mut last = None;
        for _ in 0..attempts {
            let udp = UdpSocket::bind(addr).await?;
            let port = udp.local_addr()?.port();
            match TcpListener::bind(SocketAddr::new(addr.ip(), port)).await {
                Ok(tcp) => return Ok(Listeners { udp, tcp }),
                Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => last = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(last.unwrap_or_else(|| std::io::Error::from(std::io::ErrorKind::AddrInUse)))
    }

    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.udp.local_addr()
    }
}

/// Serves until `shutdown`.
pub async fn serve(listeners: Listeners, handler: Handler, shutdown: CancellationToken) {
    let mut server = Server::new(handler);
    server.register_socket(listeners.udp);
    server.register_listener(listeners.tcp, TCP_TIMEOUT, 64);
    tokio::select! {
        _ = shutdown.cancelled() => {
            if let Err(e) = server.shutdown_gracefully().await {
                tracing::debug!(error = %e, "cluster DNS: shutting down");
            }
        }
        done = server.block_until_done() => {
            if let Err(e) = done {
                tracing::warn!(error = %e, "cluster DNS: the server stopped");
            }
        }
    }
}

/// The host's name servers from a resolv.conf text, without `own` (the cluster DNS address:
/// a node whose resolv.conf names the cluster DNS would otherwise forward to itself).
pub fn upstreams(resolv_conf: &str, own: IpAddr) -> Vec<SocketAddr> {
    crate::network::dns::parse_resolv_conf(resolv_conf)
        .servers
        .iter()
        .filter_map(|s| s.parse::<IpAddr>().ok())
        .filter(|ip| *ip != own && !ip.is_unspecified())
        .map(|ip| SocketAddr::new(ip, 53))
        .collect()
}
