#!/usr/bin/env python3
"""Writes shared/src/protobuf/schema.txt: the Kubernetes protobuf wire schema Berth decodes and
encodes `application/vnd.kubernetes.protobuf` bodies with.

Two published crates are its sources, so nobody has to vendor upstream's .proto files:
- k8s-pb (prost structs generated from upstream's generated.proto files): each message's field
  tags and wire types, and each kind's group/version/kind;
- k8s-openapi (the API types Berth uses): each field's JSON name. Upstream's proto field names
  are the JSON names, but prost renames them to snake case (`podIPs` -> `pod_i_ps`), which
  loses the capitals; the JSON name is the k8s-openapi field whose name matches once both are
  lower-cased without underscores.

Run it after changing either crate's version:  python3 scripts/gen-protobuf-schema.py
(it finds both crates' sources with `cargo metadata`).

Output, one line per message, fields as tag=jsonName:type, where type is a scalar (string,
int32, int64, bool, bytes, double), a message name, `[]T` (repeated) or `{}T` (map from string),
and jsonName `*` marks a Go struct embedded inline (its fields are the parent's in JSON):
    api.core.v1.PodStatus 1=phase:string 2=conditions:[]api.core.v1.PodCondition ...
and one line per group-version, naming the package its kinds' messages are in (kinds of meta.v1
such as DeleteOptions are looked up there when the group-version's package lacks them):
    group-version apps/v1 api.apps.v1
"""

import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "shared", "src", "protobuf", "schema.txt")
# Packages with nothing Berth serves (or that only CRDs or tests use).
SKIPPED = ("apiextensions_apiserver", "apimachinery.pkg.apis.testapigroup")


def crate_sources():
    meta = json.loads(
        subprocess.check_output(
            ["cargo", "metadata", "--format-version", "1", "--manifest-path",
             os.path.join(ROOT, "Cargo.toml")]))
    found = {}
    for p in meta["packages"]:
        if p["name"] in ("k8s-pb", "k8s-openapi"):
            found[p["name"]] = os.path.join(os.path.dirname(p["manifest_path"]), "src")
    return found


FIELD = re.compile(r'#\[prost\(([^\]]*?)tag = "(\d+)"\)\]\s*pub (?:r#)?(\w+):\s*(.*?),\n\s*(?=///|#\[|\}|$)', re.S)
STRUCT = re.compile(r'\npub struct (\w+) \{(\}|.*?\n\})', re.S)
API_VERSION = re.compile(r'const API_VERSION: &\'static str = "([^"]*)";')
# metrics.k8s.io and its siblings are published without Resource impls: their package names the
# group (metrics.pkg.apis.metrics.v1beta1 is metrics.k8s.io/v1beta1).
METRICS = re.compile(r"^metrics\.pkg\.apis\.(\w+)\.(\w+)$")
# k8s-openapi's newest Kubernetes version (its sources hold every version, whatever the features).
NEWEST_OPENAPI = "v1_37"
SCALARS = {"string", "int32", "int64", "bool", "double"}


def resolve(package, rust_type):
    """The full message name a Rust type path names, relative to `package`."""
    path = rust_type.replace("::core::option::Option<", "").replace("::prost::alloc::vec::Vec<", "")
    path = path.replace("::prost::alloc::boxed::Box<", "").rstrip(">").strip()
    parts = path.split("::")
    here = package.split(".")
    while parts and parts[0] == "super":
        here = here[:-1]
        parts = parts[1:]
    if parts and parts[0] == "crate":
        here, parts = [], parts[1:]
    return ".".join(here + parts)


def field_type(package, attrs, rust_type):
    attrs = [a.strip() for a in attrs.split(",") if a.strip()]
    kind = attrs[0]
    repeated = "repeated" in attrs
    if kind.startswith("btree_map"):
        value = attrs[1].strip().strip('"')
        if value == "message":
            inner = rust_type.split(",", 1)[1].strip().rstrip(">").strip()
            value = resolve(package, inner)
        return "{}" + value
    if kind.startswith("bytes"):
        base = "bytes"
    elif kind == "message":
        base = resolve(package, rust_type)
    elif kind in SCALARS:
        base = kind
    else:
        sys.exit(f"unknown prost field kind {kind!r} in {package}")
    return ("[]" if repeated else "") + base


def json_names(openapi_src):
    """(package, lower-cased struct) -> {normalised name: JSON name} from k8s-openapi's
    Deserialize impls. Struct names are compared lower-cased too: prost renames `HostIP` to
    `HostIp`."""
    names = {}
    base = os.path.join(openapi_src, NEWEST_OPENAPI)
    for dirpath, _, files in os.walk(base):
        package = os.path.relpath(dirpath, base).replace(os.sep, ".")
        for f in files:
            if not f.endswith(".rs") or f == "mod.rs":
                continue
            text = open(os.path.join(dirpath, f)).read()
            s = re.search(r"pub struct (\w+)", text)
            if not s:
                continue
            keys = re.findall(r'"(\w+)" => Field::Key_\w+', text)
            names[(package, s.group(1).lower())] = {k.lower().replace("_", ""): k for k in keys}
    return names


def inlined(rust_name, ty):
    """A Go struct embedded with `json:",inline"` is a proto field named after its type
    (Volume's volumeSource, Probe's handler: ProbeHandler) that the JSON form lacks."""
    short = ty.rsplit(".", 1)[-1].lower()
    return ty not in SCALARS and ty != "bytes" and not ty.startswith(("[]", "{}")) \
        and short.endswith(rust_name.replace("_", ""))


def lower_camel(snake):
    head, *rest = snake.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def main():
    src = crate_sources()
    pb, openapi = src["k8s-pb"], src["k8s-openapi"]
    names = json_names(openapi)
    messages, group_versions = {}, {}
    for dirpath, _, files in os.walk(pb):
        if "mod.rs" not in files:
            continue
        package = os.path.relpath(dirpath, pb).replace(os.sep, ".")
        if package == "." or package.startswith(SKIPPED):
            continue
        text = open(os.path.join(dirpath, "mod.rs")).read()
        for m in STRUCT.finditer(text):
            struct, body = m.group(1), m.group(2) + "\n"
            known = names.get((package, struct.lower()), {})
            fields = []
            for attrs, tag, rust_name, rust_type in FIELD.findall(body):
                rust_type = re.sub(r"\s+", "", rust_type).rstrip(",").replace(",>", ">")
                ty = field_type(package, attrs, rust_type)
                json_name = known.get(rust_name.replace("_", ""))
                if json_name is None and known and inlined(rust_name, ty):
                    json_name = "*"
                fields.append(f"{tag}={json_name or lower_camel(rust_name)}:{ty}")
            messages[f"{package}.{struct}"] = fields
        for api_version in API_VERSION.findall(text):
            group_versions[api_version] = package
        m = METRICS.match(package)
        if m:
            group_versions[f"{m.group(1).replace('_', '.')}.k8s.io/{m.group(2)}"] = package
    for name, fields in messages.items():
        for f in fields:
            t = f.split(":", 1)[1].lstrip("[]{}")
            if t not in SCALARS and t != "bytes" and t not in messages:
                sys.exit(f"{name}: {f} names an unknown message")
    with open(OUT, "w") as out:
        out.write("# Generated by scripts/gen-protobuf-schema.py from k8s-pb and k8s-openapi; "
                  "do not edit.\n")
        for name in sorted(messages):
            out.write(" ".join([name] + messages[name]) + "\n")
        for gv in sorted(group_versions):
            out.write(f"group-version {gv} {group_versions[gv]}\n")
    print(f"{OUT}: {len(messages)} messages, {len(group_versions)} group-versions")


if __name__ == "__main__":
    main()
