#!/bin/sh
# Build the ratelimit service's own configuration loader (src/config of a checkout of envoyproxy/ratelimit, given as
# $1: a folder, or a git directory with $2 the commit) against the stubs here, into $3 (a binary). Debian packages
# what else it needs: apt-get install -y golang-go golang-gopkg-yaml.v2-dev golang-github-sirupsen-logrus-dev
# golang-google-protobuf-dev. Nothing of the service is kept: it is copied into a scratch GOPATH and built there.
set -eu
src="$1"; commit="$2"; out="$3"
here="$(cd "$(dirname "$0")" && pwd)"
gopath="$(mktemp -d)"
cfg="$gopath/src/github.com/envoyproxy/ratelimit/src/config"
mkdir -p "$cfg" "$gopath/src/github.com/envoyproxy/ratelimit/src/stats" "$gopath/src/probe" \
  "$gopath/src/github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3" \
  "$gopath/src/github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3" \
  "$gopath/src/golang.org/x/net/context"
for f in config.go config_impl.go; do
  if [ -d "$src/src/config" ]; then cp "$src/src/config/$f" "$cfg/$f"
  else git --git-dir="$src" show "$commit:src/config/$f" > "$cfg/$f"; fi
done
cp "$here/stubs/pb.go" "$gopath/src/github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3/pb.go"
cp "$here/stubs/pb_struct.go" "$gopath/src/github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3/pb.go"
cp "$here/stubs/stats.go" "$gopath/src/github.com/envoyproxy/ratelimit/src/stats/stats.go"
cp "$here/stubs/context.go" "$gopath/src/golang.org/x/net/context/context.go"
cp "$here/main.go" "$gopath/src/probe/main.go"
cd "$gopath/src/probe"
GO111MODULE=off GOPATH="/usr/share/gocode:$gopath" GOCACHE="$gopath/cache" go build -o "$out" .
