#!/usr/bin/env bash
# Builds a small OCI image tarball from Debian's busybox-static: a web server (busybox httpd)
# serving a greeting on port 80, named docker.io/library/berth-demo:1.0. Usage: demo-image.sh OUT.tar
set -euo pipefail
out=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
root="$work/rootfs"
mkdir -p "$root/bin" "$root/etc" "$root/www" "$root/tmp" "$work/oci/blobs/sha256"
cp /bin/busybox "$root/bin/busybox"
for applet in $("$root/bin/busybox" --list); do
  [ "$applet" = busybox ] || ln -sf busybox "$root/bin/$applet"
done
echo 'root:x:0:0:root:/root:/bin/sh' >"$root/etc/passwd"
echo 'root:x:0:' >"$root/etc/group"
echo 'Hello from a Berth pod!' >"$root/www/index.html"
tar --sort=name --mtime=2024-01-01 --owner=0 --group=0 --numeric-owner -C "$root" -cf "$work/layer.tar" .
diff_id=$(sha256sum "$work/layer.tar" | cut -d' ' -f1)
gzip -n "$work/layer.tar"
blob() { local d; d=$(sha256sum "$1" | cut -d' ' -f1); cp "$1" "$work/oci/blobs/sha256/$d"; echo "$d $(stat -c%s "$1")"; }
read -r layer layer_size < <(blob "$work/layer.tar.gz")
printf '{"architecture":"amd64","os":"linux","config":{"Env":["PATH=/bin"],"Cmd":["httpd","-f","-p","80","-h","/www"],"ExposedPorts":{"80/tcp":{}}},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' \
  "$diff_id" >"$work/config.json"
read -r config config_size < <(blob "$work/config.json")
printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":"sha256:%s","size":%s}]}' \
  "$config" "$config_size" "$layer" "$layer_size" >"$work/manifest.json"
read -r manifest manifest_size < <(blob "$work/manifest.json")
printf '{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"annotations":{"io.containerd.image.name":"docker.io/library/berth-demo:1.0","org.opencontainers.image.ref.name":"1.0"}}]}' \
  "$manifest" "$manifest_size" >"$work/oci/index.json"
echo '{"imageLayoutVersion":"1.0.0"}' >"$work/oci/oci-layout"
tar -C "$work/oci" -cf "$out" .
