# Sourced by scripts/setup.sh and scripts/setup-test-tools.sh.
# apt_install_missing TAG PACKAGE...: installs the Debian packages that are
# not installed yet (--no-install-recommends; sudo when not root), printing
# "TAG: installing ..."; returns apt-get's status (0 when nothing was
# missing).
apt_install_missing() {
  local tag="$1" p sudo=""
  shift
  local missing=()
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" \
      || missing+=("$p")
  done
  ((${#missing[@]})) || return 0
  echo "$tag: installing ${missing[*]}"
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq \
    --no-install-recommends "${missing[@]}" >/dev/null
}
