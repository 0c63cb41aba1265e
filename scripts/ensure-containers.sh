#!/usr/bin/env bash
# Make sure a Docker-compatible tool can run the docker and container universe tests: Debian's
# podman with runc (crun cannot run on hybrid cgroup machines), and busybox-static, from which the
# tests build their image with no registry. Installs them when we are root on Debian; otherwise says
# what is missing and succeeds: those tests skip and say why, the rest of the suite runs.
set -uo pipefail

PATH="$PATH:/usr/sbin:/usr/local/sbin"
missing=()
command -v podman >/dev/null 2>&1 || missing+=(podman)
command -v runc >/dev/null 2>&1 || missing+=(runc)
if command -v dpkg >/dev/null 2>&1; then
  dpkg -s busybox-static >/dev/null 2>&1 || missing+=(busybox-static)
elif [ ! -x /bin/busybox ]; then
  missing+=(busybox-static)
fi

if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "gridbus: installing ${missing[*]} from the distribution's packages (container jobs' tests)" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null \
      || echo "gridbus: could not install ${missing[*]}; the container tests will skip" >&2
  else
    echo "gridbus: ${missing[*]} not installed (Debian: sudo apt-get install ${missing[*]});" \
         "the container tests will skip" >&2
  fi
fi

# podman runs containers with runc here: crun fails on a kernel with hybrid cgroups.
if [ "$(id -u)" = 0 ] && command -v podman >/dev/null 2>&1 && command -v runc >/dev/null 2>&1 \
   && [ -d /etc/containers ] && [ ! -e /etc/containers/containers.conf.d/gridbus-runc.conf ]; then
  mkdir -p /etc/containers/containers.conf.d
  printf '# written by gridbus scripts/ensure-containers.sh: runc, as crun fails on hybrid cgroups\n[engine]\nruntime = "runc"\n' \
    > /etc/containers/containers.conf.d/gridbus-runc.conf
fi
exit 0
