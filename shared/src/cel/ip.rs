//! Kubernetes' IP and CIDR functions (apiserver `library.IP` / `library.CIDR`): `isIP`, `ip`,
//! `ip.isCanonical`, `isCIDR`, `cidr`, and on the values `family`, `isUnspecified`,
//! `isLoopback`, `isLinkLocalMulticast`, `isLinkLocalUnicast`, `isGlobalUnicast`,
//! `containsIP`, `containsCIDR`, `ip`, `masked`, `prefixLength`, and `string(...)`.
//!
//! As upstream, addresses with a zone and IPv4-mapped IPv6 addresses are not IPs here.

use std::net::IpAddr;
use std::sync::LazyLock;

use cel::common::types::{CelBool, CelInt, CelString, STRING_TYPE, Type};
use cel::common::value::CowVal;
use cel::{DeclarationError, Env, ExecutionError};

use super::library::Out;
use crate::cidr::Cidr;

static IP_TYPE: LazyLock<Type> = LazyLock::new(|| Type::new_opaque_type("net.IP"));
static CIDR_TYPE: LazyLock<Type> = LazyLock::new(|| Type::new_opaque_type("net.CIDR"));

/// An IP address as a CEL value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ip(IpAddr);

fn parse_ip(s: &str) -> Option<IpAddr> {
    let addr: IpAddr = s.parse().ok()?;
    match addr {
        IpAddr::V6(v6) if v6.to_ipv4_mapped().is_some() => None,
        a => Some(a),
    }
}

/// A prefix as CEL's `cidr` takes it: Go's form, less IPv4-mapped IPv6 addresses.
fn parse_cidr(s: &str) -> Option<Cidr> {
    let c = Cidr::parse(s)?;
    parse_ip(&c.addr.to_string())?;
    Some(c)
}

opaque_val!(Ip, IP_TYPE);
opaque_val!(Cidr, CIDR_TYPE);

pub(crate) fn register(env: &mut Env) -> Result<(), DeclarationError> {
    let (s, i, c) = (
        || STRING_TYPE,
        || IP_TYPE.to_owned(),
        || CIDR_TYPE.to_owned(),
    );
    env.add_overload("isIP", "is_ip_string", vec![s()], |a| {
        boolean(parse_ip(string_at(&a, 0)?).is_some())
    })?;
    env.add_overload("ip", "string_to_ip", vec![s()], string_to_ip)?;
    env.add_overload("ip.isCanonical", "ip_is_canonical", vec![s()], is_canonical)?;
    env.add_overload("isCIDR", "is_cidr_string", vec![s()], |a| {
        boolean(parse_cidr(string_at(&a, 0)?).is_some())
    })?;
    env.add_overload("cidr", "string_to_cidr", vec![s()], string_to_cidr)?;
    env.add_overload("string", "ip_to_string", vec![i()], |a| {
        Ok(CowVal::owned(CelString::from(ip_at(&a, 0)?.0.to_string())))
    })?;
    env.add_overload("string", "cidr_to_string", vec![c()], |a| {
        let c = cidr_at(&a, 0)?;
        Ok(CowVal::owned(CelString::from(format!(
            "{}/{}",
            c.addr, c.len
        ))))
    })?;
    env.add_member_overload("family", "ip_family", i(), vec![], |a| {
        let family = if ip_at(&a, 0)?.0.is_ipv4() { 4 } else { 6 };
        Ok(CowVal::owned(CelInt::from(family)))
    })?;
    env.add_member_overload("isUnspecified", "ip_unspecified", i(), vec![], |a| {
        boolean(ip_at(&a, 0)?.0.is_unspecified())
    })?;
    env.add_member_overload("isLoopback", "ip_loopback", i(), vec![], |a| {
        boolean(ip_at(&a, 0)?.0.is_loopback())
    })?;
    env.add_member_overload(
        "isLinkLocalMulticast",
        "ip_ll_multicast",
        i(),
        vec![],
        |a| boolean(is_link_local_multicast(ip_at(&a, 0)?.0)),
    )?;
    env.add_member_overload("isLinkLocalUnicast", "ip_ll_unicast", i(), vec![], |a| {
        boolean(is_link_local_unicast(ip_at(&a, 0)?.0))
    })?;
    env.add_member_overload("isGlobalUnicast", "ip_global_unicast", i(), vec![], |a| {
        boolean(is_global_unicast(ip_at(&a, 0)?.0))
    })?;
    env.add_member_overload("containsIP", "cidr_contains_ip", c(), vec![i()], |a| {
        boolean(cidr_at(&a, 0)?.contains(ip_at(&a, 1)?.0))
    })?;
    env.add_member_overload(
        "containsIP",
        "cidr_contains_ip_string",
        c(),
        vec![s()],
        |a| {
            let ip = parse_ip(string_at(&a, 1)?).ok_or_else(|| bad("containsIP", "IP address"))?;
            boolean(cidr_at(&a, 0)?.contains(ip))
        },
    )?;
    env.add_member_overload("containsCIDR", "cidr_contains_cidr", c(), vec![c()], |a| {
        boolean(contains_cidr(cidr_at(&a, 0)?, cidr_at(&a, 1)?))
    })?;
    env.add_member_overload(
        "containsCIDR",
        "cidr_contains_cidr_string",
        c(),
        vec![s()],
        |a| {
            let other = parse_cidr(string_at(&a, 1)?).ok_or_else(|| bad("containsCIDR", "CIDR"))?;
            boolean(contains_cidr(cidr_at(&a, 0)?, other))
        },
    )?;
    env.add_member_overload("ip", "cidr_ip", c(), vec![], |a| {
        Ok(CowVal::owned(Ip(cidr_at(&a, 0)?.addr)))
    })?;
    env.add_member_overload("masked", "cidr_masked", c(), vec![], |a| {
        Ok(CowVal::owned(cidr_at(&a, 0)?.masked()))
    })?;
    env.add_member_overload("prefixLength", "cidr_prefix_length", c(), vec![], |a| {
        Ok(CowVal::owned(CelInt::from(i64::from(cidr_at(&a, 0)?.len))))
    })
}

fn boolean<'b, 'v>(b: bool) -> Out<'b, 'v> {
    Ok(CowVal::owned(CelBool::from(b)))
}

fn bad(function: &str, what: &str) -> ExecutionError {
    ExecutionError::function_error(function, format!("invalid {what}"))
}

fn string_at<'a>(args: &'a [CowVal<'_, '_>], i: usize) -> Result<&'a str, ExecutionError> {
    args.get(i)
        .and_then(|a| a.downcast_ref::<CelString>())
        .map(|s| s.inner())
        .ok_or_else(ExecutionError::missing_argument_or_target)
}

fn ip_at(args: &[CowVal<'_, '_>], i: usize) -> Result<Ip, ExecutionError> {
    args.get(i)
        .and_then(|a| a.downcast_ref::<Ip>())
        .copied()
        .ok_or_else(ExecutionError::missing_argument_or_target)
}

fn cidr_at(args: &[CowVal<'_, '_>], i: usize) -> Result<Cidr, ExecutionError> {
    args.get(i)
        .and_then(|a| a.downcast_ref::<Cidr>())
        .copied()
        .ok_or_else(ExecutionError::missing_argument_or_target)
}

fn string_to_ip<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Out<'b, 'v> {
    let s = string_at(&args, 0)?;
    parse_ip(s).map(|a| CowVal::owned(Ip(a))).ok_or_else(|| {
        ExecutionError::function_error(
            "ip",
            format!("IP Address {s:?} parse error during conversion from string"),
        )
    })
}

fn string_to_cidr<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Out<'b, 'v> {
    let s = string_at(&args, 0)?;
    parse_cidr(s).map(CowVal::owned).ok_or_else(|| {
        ExecutionError::function_error(
            "cidr",
            format!("network address {s:?} parse error during conversion from string"),
        )
    })
}

/// Whether the address is written the way it prints (`::1`, not `0:0::1`).
fn is_canonical<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Out<'b, 'v> {
    let s = string_at(&args, 0)?;
    let addr = parse_ip(s).ok_or_else(|| bad("ip.isCanonical", "IP address"))?;
    boolean(addr.to_string() == s)
}

fn contains_cidr(outer: Cidr, inner: Cidr) -> bool {
    outer.contains_cidr(inner)
}

fn is_link_local_multicast(addr: IpAddr) -> bool {
    match addr {
        IpAddr::V4(v4) => v4.octets()[..3] == [224, 0, 0],
        IpAddr::V6(v6) => v6.segments()[0] & 0xff0f == 0xff02,
    }
}

fn is_link_local_unicast(addr: IpAddr) -> bool {
    match addr {
        IpAddr::V4(v4) => v4.is_link_local(),
        IpAddr::V6(v6) => v6.segments()[0] & 0xffc0 == 0xfe80,
    }
}

/// Go's `IsGlobalUnicast`: anything but unspecified, loopback, multicast, link-local unicast
/// and the IPv4 broadcast address.
fn is_global_unicast(addr: IpAddr) -> bool {
    let broadcast = matches!(addr, IpAddr::V4(v4) if v4.is_broadcast());
    !(addr.is_unspecified()
        || addr.is_loopback()
        || addr.is_multicast()
        || is_link_local_unicast(addr)
        || broadcast)
}
