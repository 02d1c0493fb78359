#!/bin/sh
{% autoescape off %}
# GPU fleet agent installer, served by {{ server }}.
#   curl -fsSL {{ server }}/install.sh | sudo sh -s -- --token TOKEN
# Installs /opt/fleet-agent (own virtualenv), writes /etc/fleet-agent/agent.toml and a systemd unit,
# enrols the node and starts the agent. Running it again upgrades in place and keeps the credential.
#
# Options:
#   --token TOKEN      enrolment token (needed on first install)
#   --server URL       control-plane URL (default {{ server }})
#   --offline          install the agent and nvidia-ml-py from wheels this server serves (no package index)
#   --root DIR         install under DIR instead of / (tests, images)
#   --no-systemd       write the unit file but do not call systemctl
#   --python PATH      Python 3.9+ interpreter to build the virtualenv with (default python3)
#   --allow-actions L  actions this node runs when the server asks, comma-separated (collect_evidence, verify,
#                      dcgm_diag, gpu_reset, reboot, run_hook or run_hook:NAME); "none" allows none. Writes the [actions]
#                      block of agent.toml and, for reboot and gpu_reset only, the narrow sudoers rule they need
#                      (/etc/sudoers.d/fleet-agent) and a systemd drop-in that lets sudo work. Without the option
#                      a re-run leaves all of that as it is; see docs/executors.md.
set -eu

SERVER="{{ server }}"
TOKEN=""
OFFLINE=0
ROOT=""
SYSTEMD=1
PYTHON=python3
ALLOW_ACTIONS=""
ALLOW_SET=0
AGENT_WHEEL="{{ agent_wheel }}"
OFFLINE_WHEELS="{{ offline_wheels }}"

die() { echo "fleet-agent install: $*" >&2; exit 1; }

while [ $# -gt 0 ]; do
  case "$1" in
    --token) TOKEN="${2:-}"; shift 2 ;;
    --server) SERVER="${2:-}"; shift 2 ;;
    --offline) OFFLINE=1; shift ;;
    --root) ROOT="${2:-}"; shift 2 ;;
    --no-systemd) SYSTEMD=0; shift ;;
    --python) PYTHON="${2:-}"; shift 2 ;;
    --allow-actions) ALLOW_ACTIONS="${2:-}"; ALLOW_SET=1; shift 2 ;;
    *) die "unknown option $1" ;;
  esac
done

[ -n "$AGENT_WHEEL" ] || die "the server has no agent wheel to serve (run: manage.py build_agent_wheels)"
command -v "$PYTHON" >/dev/null 2>&1 || die "$PYTHON not found; install python3 and python3-venv"

PREFIX="$ROOT/opt/fleet-agent"
CONF_DIR="$ROOT/etc/fleet-agent"
STATE_DIR="$ROOT/var/lib/fleet-agent"
UNIT="$ROOT/etc/systemd/system/fleet-agent.service"
DOWNLOADS="$PREFIX/wheels"

fetch() {  # fetch URL FILE — curl when present, else Python's urllib
  if command -v curl >/dev/null 2>&1; then
    curl -fsSL "$1" -o "$2"
  else
    "$PYTHON" -c 'import sys, urllib.request; urllib.request.urlretrieve(sys.argv[1], sys.argv[2])' "$1" "$2"
  fi
}

if [ ! -f "$STATE_DIR/credential.json" ] && [ -z "$TOKEN" ]; then
  die "first install needs --token TOKEN"
fi

mkdir -p "$PREFIX" "$CONF_DIR" "$STATE_DIR" "$DOWNLOADS" "$(dirname "$UNIT")"
chmod 0700 "$STATE_DIR"

echo "==> virtualenv in $PREFIX/venv"
[ -x "$PREFIX/venv/bin/python" ] || "$PYTHON" -m venv "$PREFIX/venv"

echo "==> downloading $AGENT_WHEEL from $SERVER"
fetch "$SERVER/agent/files/$AGENT_WHEEL" "$DOWNLOADS/$AGENT_WHEEL"
if [ "$OFFLINE" = 1 ]; then
  for wheel in $OFFLINE_WHEELS; do fetch "$SERVER/agent/files/$wheel" "$DOWNLOADS/$wheel"; done
  "$PREFIX/venv/bin/python" -m pip install -q --upgrade --no-index --find-links "$DOWNLOADS" "$DOWNLOADS/$AGENT_WHEEL"
else
  "$PREFIX/venv/bin/python" -m pip install -q --upgrade "$DOWNLOADS/$AGENT_WHEEL"
fi

CONF="$CONF_DIR/agent.toml"
if [ ! -f "$CONF" ]; then
  echo "==> writing $CONF"
  cat > "$CONF" <<CONF
# fleet-agent configuration; environment variables FLEET_AGENT_* and flags override it.
server = "$SERVER"
state_dir = "/var/lib/fleet-agent"
interval_s = 15
CONF
fi

ACTIONS_MARK="# -- written by install.sh --allow-actions --"
if [ "$ALLOW_SET" = 1 ]; then
  ALLOW_TOML=""
  PRIVILEGED=""
  for kind in $(echo "$ALLOW_ACTIONS" | tr ',' ' '); do
    case "$kind" in
      none) continue ;;
      collect_evidence|verify|dcgm_diag|run_hook) ;;
      run_hook:*) echo "${kind#run_hook:}" | grep -Eq '^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$' || die "bad hook name in $kind" ;;
      reboot|gpu_reset) PRIVILEGED="$PRIVILEGED $kind" ;;
      *) die "unknown action kind '$kind' (collect_evidence, verify, dcgm_diag, gpu_reset, reboot, run_hook, run_hook:NAME)" ;;
    esac
    ALLOW_TOML="$ALLOW_TOML${ALLOW_TOML:+, }\"$kind\""
  done
  if grep -q '^\[actions\]' "$CONF" && ! grep -qF "$ACTIONS_MARK" "$CONF"; then
    die "$CONF has an [actions] table of its own: edit it by hand, or remove it to let --allow-actions write one"
  fi
  SYSTEMCTL="$(command -v systemctl || echo /usr/bin/systemctl)"
  NVIDIA_SMI="$(command -v nvidia-smi || echo /usr/bin/nvidia-smi)"
  echo "==> actions allowed on this node: ${ALLOW_TOML:-none}"
  # Our block is always the last thing in the file (a TOML table runs to the end): replace it.
  sed -i "/^$ACTIONS_MARK/,\$d" "$CONF"
  cat >> "$CONF" <<ACTIONS
$ACTIONS_MARK (docs/executors.md)
[actions]
allow = [$ALLOW_TOML]
reboot_command = ["sudo", "-n", "$SYSTEMCTL", "reboot"]
gpu_reset_command = ["sudo", "-n", "$NVIDIA_SMI", "-r", "-i", "{gpu}"]
nvidia_smi = "$NVIDIA_SMI"
ACTIONS

  SUDOERS="$ROOT/etc/sudoers.d/fleet-agent"
  DROPIN="$ROOT/etc/systemd/system/fleet-agent.service.d/actions.conf"
  if [ -n "$PRIVILEGED" ]; then
    mkdir -p "$(dirname "$SUDOERS")" "$(dirname "$DROPIN")"
    {
      echo "# Written by the fleet-agent installer (--allow-actions): exactly these commands as root, nothing more."
      for kind in $PRIVILEGED; do
        case "$kind" in
          reboot) echo "fleet-agent ALL=(root) NOPASSWD: $SYSTEMCTL reboot" ;;
          gpu_reset) echo "fleet-agent ALL=(root) NOPASSWD: $NVIDIA_SMI -r -i [0-9], $NVIDIA_SMI -r -i [0-9][0-9]" ;;
        esac
      done
    } > "$SUDOERS.tmp"
    chmod 0440 "$SUDOERS.tmp"
    if command -v visudo >/dev/null 2>&1; then
      visudo -cf "$SUDOERS.tmp" >/dev/null || { rm -f "$SUDOERS.tmp"; die "the sudoers rule did not validate"; }
    fi
    mv "$SUDOERS.tmp" "$SUDOERS"
    echo "==> sudoers rule $SUDOERS:$PRIVILEGED"
    # The unit forbids new privileges and bounds the capabilities to CAP_SYSLOG; sudo needs both relaxed, and
    # nvidia-smi -r needs CAP_SYS_ADMIN. Nothing else changes.
    CAPS="CAP_SETUID CAP_SETGID CAP_AUDIT_WRITE CAP_SYS_RESOURCE"
    case "$PRIVILEGED" in *gpu_reset*) CAPS="$CAPS CAP_SYS_ADMIN" ;; esac
    cat > "$DROPIN" <<DROPIN
# Written by the fleet-agent installer (--allow-actions$PRIVILEGED): lets the agent use its sudoers rule.
[Service]
NoNewPrivileges=false
CapabilityBoundingSet=$CAPS
ReadWritePaths=-/run/sudo
DROPIN
  else
    rm -f "$SUDOERS" "$DROPIN"
  fi
fi

AGENT="$PREFIX/venv/bin/fleet-agent"
if [ -f "$STATE_DIR/credential.json" ]; then
  echo "==> already enrolled; keeping the credential (upgrade)"
else
  echo "==> enrolling with $SERVER"
  "$AGENT" enroll --config "$CONF" --server "$SERVER" --state-dir "$STATE_DIR" --token "$TOKEN"
fi

echo "==> systemd unit $UNIT"
cat > "$UNIT" <<'UNIT'
{{ unit }}UNIT

if [ -z "$ROOT" ]; then
  # The agent runs unprivileged (CAP_SYSLOG for /dev/kmsg only); see the unit's comments.
  id fleet-agent >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin fleet-agent
  chown -R fleet-agent:fleet-agent "$STATE_DIR"
fi

if [ "$SYSTEMD" = 1 ]; then
  systemctl daemon-reload
  systemctl enable fleet-agent >/dev/null
  systemctl restart fleet-agent
  echo "==> fleet-agent running (systemctl status fleet-agent)"
else
  echo "==> skipped systemctl (--no-systemd)"
fi
echo "done."
{% endautoescape %}
