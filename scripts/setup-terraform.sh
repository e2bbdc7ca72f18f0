#!/usr/bin/env bash
# Terraform, terraform-provider-openstack and tflint, working offline.
#   - terraform: the machine's own if >= TERRAFORM_MIN_VERSION, else built from the Go module proxy;
#   - the OpenStack provider: built from the Go module proxy and served from a filesystem mirror
#     (build/terraform/cli.tfrc points `terraform init` at it);
#   - tflint: built from the Go module proxy.
# Everything lands under build/ (never in git). Safe to re-run: builds only what is missing.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
# shellcheck source=../packages/tools.env
. "$root/packages/tools.env"

bin="$root/build/tools/bin"
src="$root/build/tools/src"
mirror="$root/build/terraform/mirror"
provider_dir="$mirror/registry.terraform.io/terraform-provider-openstack/openstack/${OPENSTACK_PROVIDER_VERSION#v}/linux_amd64"
provider_bin="$provider_dir/terraform-provider-openstack_${OPENSTACK_PROVIDER_VERSION}"
mkdir -p "$bin" "$src" "$provider_dir"

say() { echo "setup-terraform: $*"; }

# `go install module@version` fails against the proxy these machines reach (it asks for the
# version list), so each tool is built from a tiny module that requires it.
go_build() {  # go_build NAME MODULE VERSION PACKAGE OUTPUT
    local name="$1" module="$2" version="$3" package="$4" output="$5" dir="$src/$1"
    mkdir -p "$dir"
    printf 'module sdmzkit/tools/%s\n\ngo 1.24\n\nrequire %s %s\n' "$name" "$module" "$version" > "$dir/go.mod"
    printf '//go:build tools\n\npackage tools\n\nimport _ "%s"\n' "$package" > "$dir/tools.go"
    say "building $name $version (a few minutes, once)"
    (cd "$dir" && GOFLAGS=-mod=mod go mod tidy >/dev/null 2>&1 && GOFLAGS=-mod=mod go build -trimpath -o "$output" "$package")
}

version_ge() { [ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -n1)" = "$2" ]; }

# terraform
if [ ! -x "$bin/terraform" ]; then
    system_tf="$(PATH="${PATH//$bin:/}" command -v terraform || true)"
    system_version="$([ -n "$system_tf" ] && TF_CLI_CONFIG_FILE=/dev/null "$system_tf" version -json 2>/dev/null \
        | python3 -c 'import json,sys; print(json.load(sys.stdin)["terraform_version"])' 2>/dev/null || true)"
    if [ -n "$system_version" ] && version_ge "$system_version" "$TERRAFORM_MIN_VERSION"; then
        ln -sf "$system_tf" "$bin/terraform"
        say "using the machine's terraform $system_version"
    else
        go_build terraform github.com/hashicorp/terraform "$TERRAFORM_VERSION" github.com/hashicorp/terraform "$bin/terraform"
    fi
fi

# the OpenStack provider, in a filesystem mirror
if [ ! -x "$provider_bin" ]; then
    go_build provider github.com/terraform-provider-openstack/terraform-provider-openstack "$OPENSTACK_PROVIDER_VERSION" \
        github.com/terraform-provider-openstack/terraform-provider-openstack "$provider_bin"
fi

# tflint
if [ ! -x "$bin/tflint" ]; then
    go_build tflint github.com/terraform-linters/tflint "$TFLINT_VERSION" github.com/terraform-linters/tflint "$bin/tflint"
fi

cli="$root/build/terraform/cli.tfrc"
desired="provider_installation {
  filesystem_mirror {
    path    = \"$mirror\"
    include = [\"registry.terraform.io/terraform-provider-openstack/openstack\"]
  }
  direct {
    exclude = [\"registry.terraform.io/terraform-provider-openstack/openstack\"]
  }
}
plugin_cache_dir = \"$root/build/terraform/plugin-cache\""
mkdir -p "$root/build/terraform/plugin-cache"
if [ ! -f "$cli" ] || [ "$(cat "$cli")" != "$desired" ]; then
    printf '%s\n' "$desired" > "$cli"
    say "wrote $cli"
fi
