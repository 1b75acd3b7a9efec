//! Table tests of the evaluation API and the library functions.

use serde_json::{Value, json};

use super::{Activation, CelError, Program};

fn eval(expr: &str, self_value: &Value) -> Result<Value, CelError> {
    let program = Program::compile(expr)?;
    let mut vars = Activation::new();
    vars.bind("self", self_value);
    program.eval(&vars)
}

fn check_table(cases: &[(&str, Value)]) {
    let object = json!({
        "name": "web-1",
        "replicas": 3,
        "ratio": 0.5,
        "tags": ["b", "a", "c"],
        "ports": [80, 443, 8080],
        "labels": {"app": "web", "tier": "front"},
        "memory": "1Gi",
        "nothing": null,
        "endpoint": "https://example.com:8443/api/v1?watch=true&x=1&x=2"
    });
    for (expr, want) in cases {
        match eval(expr, &object) {
            Ok(got) => assert_eq!(&got, want, "{expr}"),
            Err(e) => panic!("{expr}: {e}"),
        }
    }
}

#[test]
fn json_values_become_cel_values_and_back() {
    check_table(&[
        ("self.replicas", json!(3)),
        ("self.replicas + 1", json!(4)),
        ("self.ratio * 2.0", json!(1.0)),
        ("self.name", json!("web-1")),
        ("self.nothing == null", json!(true)),
        ("self.labels", json!({"app": "web", "tier": "front"})),
        ("self.tags", json!(["b", "a", "c"])),
        ("type(self.replicas) == int", json!(true)),
        ("type(self.ratio) == double", json!(true)),
        ("{'a': [1, 2.5]}", json!({"a": [1, 2.5]})),
    ]);
}

#[test]
fn macros_and_presence_tests() {
    check_table(&[
        ("has(self.labels)", json!(true)),
        ("has(self.missing)", json!(false)),
        ("has(self.labels.app)", json!(true)),
        ("'app' in self.labels", json!(true)),
        ("self.ports.all(p, p > 0)", json!(true)),
        ("self.ports.exists(p, p == 443)", json!(true)),
        ("self.ports.exists_one(p, p > 100)", json!(false)),
        ("self.ports.map(p, p * 2)", json!([160, 886, 16160])),
        ("self.ports.filter(p, p > 100)", json!([443, 8080])),
        ("self.ports.map(p, p > 100, p)", json!([443, 8080])),
        ("self.labels.all(k, k.size() > 2)", json!(true)),
        ("size(self.tags)", json!(3)),
        ("self.tags.size()", json!(3)),
        ("size(self.name)", json!(5)),
    ]);
}

#[test]
fn string_functions() {
    check_table(&[
        ("self.name.matches('^web-[0-9]+$')", json!(true)),
        ("matches(self.name, '^x')", json!(false)),
        ("self.tags.all(t, t.matches('^[a-c]$'))", json!(true)),
        ("'abc 123 def 456'.find('[0-9]+')", json!("123")),
        ("'abc'.find('[0-9]+')", json!("")),
        ("'abc 123 def 456'.findAll('[0-9]+')", json!(["123", "456"])),
        ("'a1b2c3'.findAll('[0-9]', 2)", json!(["1", "2"])),
        ("self.name.startsWith('web')", json!(true)),
        ("self.name.endsWith('-1')", json!(true)),
        ("self.name.contains('b-')", json!(true)),
        ("'ABC'.lowerAscii()", json!("abc")),
        ("'abc'.upperAscii()", json!("ABC")),
        ("'a,b,c'.split(',')", json!(["a", "b", "c"])),
        ("['a', 'b'].join('-')", json!("a-b")),
        ("'  x '.trim()", json!("x")),
        ("'a-b-c'.replace('-', '+')", json!("a+b+c")),
        ("'hello'.indexOf('l')", json!(2)),
        ("'hello'.lastIndexOf('l')", json!(3)),
        ("'hello'.substring(1, 3)", json!("el")),
        ("'hello'.charAt(1)", json!("e")),
    ]);
}

#[test]
fn list_functions() {
    check_table(&[
        ("self.tags.isSorted()", json!(false)),
        ("[1, 2, 2, 5].isSorted()", json!(true)),
        ("['a', 'b'].isSorted()", json!(true)),
        ("[].isSorted()", json!(true)),
        ("self.ports.sum()", json!(8603)),
        ("[1.5, 2.5].sum()", json!(4.0)),
        ("[].sum()", json!(0)),
        ("self.ports.min()", json!(80)),
        ("self.ports.max()", json!(8080)),
        ("self.tags.min()", json!("a")),
        ("self.tags.indexOf('a')", json!(1)),
        ("self.tags.indexOf('z')", json!(-1)),
        ("[1, 2, 1].lastIndexOf(1)", json!(2)),
        ("self.tags.sort()", json!(["a", "b", "c"])),
        ("[[1], [2, 3]].flatten()", json!([1, 2, 3])),
        ("lists.range(3)", json!([0, 1, 2])),
        ("[1, 2, 2].distinct()", json!([1, 2])),
        ("sets.contains(self.tags, ['a', 'c'])", json!(true)),
        ("sets.contains(self.tags, ['z'])", json!(false)),
        ("sets.equivalent([1, 2, 2], [2, 1])", json!(true)),
        ("sets.equivalent([1], [1, 3])", json!(false)),
        ("sets.intersects(self.ports, [443, 1])", json!(true)),
        ("sets.intersects([], [1])", json!(false)),
    ]);
}

#[test]
fn quantity_functions() {
    check_table(&[
        ("isQuantity(self.memory)", json!(true)),
        ("isQuantity('1 Gi')", json!(false)),
        (
            "quantity(self.memory).isGreaterThan(quantity('1G'))",
            json!(true),
        ),
        ("quantity('500m').isLessThan(quantity('1'))", json!(true)),
        ("quantity('1') == quantity('1000m')", json!(true)),
        ("quantity('1').compareTo(quantity('2'))", json!(-1)),
        ("quantity('1Ki').asInteger()", json!(1024)),
        ("quantity('1.5').isInteger()", json!(false)),
        ("quantity('1.5').asApproximateFloat()", json!(1.5)),
        ("quantity('-3').sign()", json!(-1)),
        ("quantity('1').add(quantity('500m'))", json!("1500m")),
        ("quantity('1').add(2)", json!("3")),
        ("quantity('1').sub(quantity('1n'))", json!("999999999n")),
        ("quantity('1.5Gi').sub(1)", json!("1610612735")),
    ]);
}

#[test]
fn url_functions() {
    check_table(&[
        ("isURL(self.endpoint)", json!(true)),
        ("isURL('/just/a/path')", json!(true)),
        ("isURL('not a url')", json!(false)),
        ("isURL('relative/path')", json!(false)),
        ("url(self.endpoint).getScheme()", json!("https")),
        ("url(self.endpoint).getHost()", json!("example.com:8443")),
        ("url(self.endpoint).getHostname()", json!("example.com")),
        ("url(self.endpoint).getPort()", json!("8443")),
        ("url(self.endpoint).getEscapedPath()", json!("/api/v1")),
        (
            "url(self.endpoint).getQuery()",
            json!({"watch": ["true"], "x": ["1", "2"]}),
        ),
        ("url('https://[::1]:80/').getHostname()", json!("::1")),
        ("url('https://[::1]/').getPort()", json!("")),
    ]);
}

#[test]
fn ip_and_cidr_functions() {
    check_table(&[
        ("isIP('10.0.0.1')", json!(true)),
        ("isIP('fd00::1')", json!(true)),
        ("isIP('::ffff:10.0.0.1')", json!(false)),
        ("isIP('10.0.0.256')", json!(false)),
        ("isIP('fe80::1%eth0')", json!(false)),
        ("ip('10.0.0.1').family()", json!(4)),
        ("ip('::1').family()", json!(6)),
        ("ip('127.0.0.1').isLoopback()", json!(true)),
        ("ip('0.0.0.0').isUnspecified()", json!(true)),
        ("ip('224.0.0.5').isLinkLocalMulticast()", json!(true)),
        ("ip('ff02::1').isLinkLocalMulticast()", json!(true)),
        ("ip('169.254.1.1').isLinkLocalUnicast()", json!(true)),
        ("ip('fe80::1').isLinkLocalUnicast()", json!(true)),
        ("ip('8.8.8.8').isGlobalUnicast()", json!(true)),
        ("ip('255.255.255.255').isGlobalUnicast()", json!(false)),
        ("ip.isCanonical('2001:db8::1')", json!(true)),
        ("ip.isCanonical('2001:DB8:0::1')", json!(false)),
        ("ip('10.0.0.1') == ip('10.0.0.1')", json!(true)),
        ("string(ip('2001:db8:0::1'))", json!("2001:db8::1")),
        ("isCIDR('10.0.0.0/8')", json!(true)),
        ("isCIDR('10.0.0.0/33')", json!(false)),
        ("isCIDR('10.0.0.0')", json!(false)),
        ("cidr('10.0.0.0/8').containsIP(ip('10.1.2.3'))", json!(true)),
        ("cidr('10.0.0.0/8').containsIP('11.0.0.1')", json!(false)),
        ("cidr('10.0.0.0/8').containsIP('::1')", json!(false)),
        (
            "cidr('10.0.0.0/8').containsCIDR('10.1.0.0/16')",
            json!(true),
        ),
        (
            "cidr('10.1.0.0/16').containsCIDR(cidr('10.0.0.0/8'))",
            json!(false),
        ),
        (
            "cidr('10.1.2.3/16').masked() == cidr('10.1.0.0/16')",
            json!(true),
        ),
        ("string(cidr('10.1.2.3/16').masked())", json!("10.1.0.0/16")),
        ("cidr('fd00::/64').prefixLength()", json!(64)),
        ("string(cidr('10.1.2.3/16').ip())", json!("10.1.2.3")),
        ("cidr('0.0.0.0/0').containsIP('1.2.3.4')", json!(true)),
    ]);
}

#[test]
fn duration_functions() {
    check_table(&[
        ("duration('1h30m') > duration('90m')", json!(false)),
        ("duration('1h30m') == duration('90m')", json!(true)),
        ("duration('10s') < duration('1m')", json!(true)),
        ("duration('1.5h').getMinutes()", json!(90)),
        ("duration('-2h').getHours()", json!(-2)),
        ("duration('1500ms').getSeconds()", json!(1)),
        ("duration('1s').getMilliseconds()", json!(1000)),
        ("duration('1m') + duration('30s')", json!("90s")),
        ("duration('1m') - duration('90s')", json!("-30s")),
        ("string(duration('250ms'))", json!("0.25s")),
        ("duration('0') == duration('0s')", json!(true)),
        (
            "duration('1h') != duration('0s') && duration('30s') > duration('1h')",
            json!(false),
        ),
    ]);
    for bad in [
        "duration('1')",
        "duration('h')",
        "duration('1x')",
        "duration('')",
    ] {
        assert!(
            matches!(eval(bad, &json!({})), Err(CelError::Eval(_))),
            "{bad}"
        );
    }
}

#[test]
fn typed_results_refuse_other_types() {
    let data = json!({"n": 1});
    let mut vars = Activation::new();
    vars.bind("self", &data);
    let p = Program::compile("self.n").unwrap();
    assert_eq!(
        p.eval_bool(&vars),
        Err(CelError::Type {
            want: "bool",
            got: "int".to_string()
        })
    );
    let p = Program::compile("'n is ' + string(self.n)").unwrap();
    assert_eq!(p.eval_string(&vars).unwrap(), "n is 1");
    assert!(
        Program::compile("self.n > 0")
            .unwrap()
            .eval_bool(&vars)
            .unwrap()
    );
}

#[test]
fn errors_are_reported_not_panicked() {
    let data = json!({"n": 1, "list": []});
    let cases = [
        "self.missing",
        "self.n / 0",
        "self.list.min()",
        "quantity('x')",
        "'a'.matches('(')",
        "url('::')",
        "self.n.startsWith('a')",
        "undefinedVariable",
        "quantity('1Ki').add('x')",
    ];
    for expr in cases {
        let got = eval(expr, &data);
        assert!(matches!(got, Err(CelError::Eval(_))), "{expr}: {got:?}");
    }
    assert!(matches!(
        Program::compile("self.n >"),
        Err(CelError::Compile(m)) if m.starts_with("ERROR: <input>:1:")
    ));
}

#[test]
fn references_tell_transition_rules_apart() {
    let p = Program::compile("self.x == oldSelf.x").unwrap();
    assert!(p.references("oldSelf"));
    assert!(p.references("self"));
    let p = Program::compile("self.x.all(i, i > 0)").unwrap();
    assert!(!p.references("oldSelf"));
}

#[test]
fn programs_are_shareable_between_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Program>();
    let p = Program::compile("self + 1").unwrap();
    let handles: Vec<_> = (0..4)
        .map(|i| {
            let p = p.clone();
            std::thread::spawn(move || {
                let v = json!(i);
                let mut vars = Activation::new();
                vars.bind("self", &v);
                p.eval(&vars)
            })
        })
        .collect();
    for (i, h) in handles.into_iter().enumerate() {
        assert_eq!(h.join().unwrap().unwrap(), json!(i + 1));
    }
}

#[test]
fn cost_limit_stops_runaway_expressions() {
    let items: Vec<i64> = (0..2000).collect();
    let data = json!(items);
    let mut vars = Activation::new();
    vars.bind("self", &data);
    // 2000^3 = 8e9 iterations: would run for minutes without the limit.
    let hostile =
        Program::compile("self.all(x, self.all(y, self.all(z, x + y + z >= 0)))").unwrap();
    assert_eq!(hostile.eval_bool(&vars), Err(CelError::CostLimit));
    // Quadratic work per iteration (joining a big string every time) is charged for its size.
    let strings: Vec<String> = (0..3000).map(|i| format!("item-{i:06}")).collect();
    let data = json!(strings);
    let mut vars = Activation::new();
    vars.bind("self", &data);
    let joins = Program::compile("self.map(x, self.join(',')).size() > 0").unwrap();
    assert_eq!(joins.eval_bool(&vars), Err(CelError::CostLimit));
    // A single pass over the same list stays well within the limit, and reports its cost.
    let linear = Program::compile("self.all(x, x.startsWith('item-'))").unwrap();
    let (ok, cost) = linear
        .eval_bool_within(&vars, super::PER_CALL_LIMIT)
        .unwrap();
    assert!(ok);
    assert!((3000..100_000).contains(&cost), "cost {cost}");
    // The limit is the caller's: the same pass fails under a smaller one.
    assert_eq!(
        linear.eval_bool_within(&vars, 1000),
        Err(CelError::CostLimit)
    );
}
