"""Conformance of the lab's Proxmox VE API with proxmoxer, a client nobody on this project wrote.

Authenticates with an API token over TLS verified against the lab CA, lists
/cluster/resources, stops and starts one VM waiting on each task with
proxmoxer.tools.Tasks.blocking_status, and checks that a wrong token is refused with 401.
Exits non-zero on the first failed expectation. The token secret is read from a file and
never printed.
"""

import argparse
import sys
import time

from proxmoxer import ProxmoxAPI
from proxmoxer.core import ResourceException
from proxmoxer.tools import Tasks


def expect(cond, what):
    if not cond:
        print(f"FAILED: {what}", file=sys.stderr)
        sys.exit(1)
    print(f"ok: {what}")


def vm_row(prox, vmid):
    rows = prox.cluster.resources.get(type="vm")
    matches = [r for r in rows if r.get("vmid") == vmid]
    expect(len(matches) == 1, f"/cluster/resources lists VM {vmid} once")
    return matches[0]


def wait_status(prox, vmid, wanted, timeout):
    """Polls /cluster/resources until the VM reports `wanted` (tasks end before state settles)."""
    deadline = time.monotonic() + timeout
    while True:
        status = vm_row(prox, vmid).get("status")
        if status == wanted or time.monotonic() >= deadline:
            expect(status == wanted, f"VM {vmid} reports {wanted} (last: {status})")
            return
        time.sleep(0.2)


def pick_vm(prox):
    """A running QEMU guest, preferring one that HA does not manage."""
    rows = [r for r in prox.cluster.resources.get(type="vm") if r.get("type") == "qemu"]
    running = [r for r in rows if r.get("status") == "running"]
    expect(len(running) > 0, "/cluster/resources lists a running qemu VM")
    running.sort(key=lambda r: ("hastate" in r, r["vmid"]))
    return running[0]["vmid"]


def run_task(prox, upid, what):
    expect(isinstance(upid, str) and upid.startswith("UPID:"), f"{what} returns a UPID")
    status = Tasks.blocking_status(prox, upid, timeout=60, polling_interval=0.2)
    expect(status is not None, f"{what} task finishes within 60 s")
    expect(status.get("status") == "stopped", f"{what} task is stopped")
    expect(status.get("exitstatus") == "OK", f"{what} task exit status is OK")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", required=True)
    parser.add_argument("--port", type=int, default=8006)
    parser.add_argument("--ca", required=True, help="PEM file of the lab Proxmox CA")
    parser.add_argument("--token-id", required=True, help="user@realm!tokenname")
    parser.add_argument("--secret-file", required=True)
    parser.add_argument("--vmid", default="auto", help="a VM id, or auto")
    parser.add_argument("--state-timeout", type=float, default=60.0)
    args = parser.parse_args()

    with open(args.secret_file, encoding="utf-8") as f:
        secret = f.read().strip()
    user, token_name = args.token_id.split("!", 1)

    prox = ProxmoxAPI(
        args.host,
        port=args.port,
        user=user,
        token_name=token_name,
        token_value=secret,
        verify_ssl=args.ca,
        timeout=30,
    )

    version = prox.version.get()
    expect("version" in version and "release" in version, "GET /version with the token")
    vmid = pick_vm(prox) if args.vmid == "auto" else int(args.vmid)

    row = vm_row(prox, vmid)
    expect(row.get("type") == "qemu", "resource row is a qemu guest")
    expect(row.get("status") == "running", "VM is running before the test")
    node = row["node"]

    run_task(prox, prox.nodes(node).qemu(vmid).status.stop.post(), "stop")
    wait_status(prox, vmid, "stopped", args.state_timeout)
    # HA may have moved the guest meanwhile: re-resolve its node, as clients must.
    node = vm_row(prox, vmid)["node"]

    run_task(prox, prox.nodes(node).qemu(vmid).status.start.post(), "start")
    wait_status(prox, vmid, "running", args.state_timeout)

    config = prox.nodes(node).qemu(vmid).config.get()
    expect(str(config.get("smbios1", "")).startswith("uuid="), "config carries smbios1 uuid")
    disk = str(config.get("scsi0", ""))
    expect(":" in disk.split(",")[0], "config carries its scsi0 disk as STORAGE:VOLUME")
    storages = {s["storage"]: s for s in prox.storage.get()}
    expect(disk.split(":")[0] in storages, "the disk's storage is listed by /storage")
    expect(storages.get("local-lvm", {}).get("type") == "lvmthin", "local-lvm is lvmthin")
    expect(not storages.get("local-lvm", {}).get("shared"), "local-lvm is not shared")
    expect(all(s.get("type") == "dir" for s in prox.storage.get(type="dir")), "/storage?type= filters")

    wrong = ProxmoxAPI(
        args.host,
        port=args.port,
        user=user,
        token_name=token_name,
        token_value="not-the-secret",
        verify_ssl=args.ca,
        timeout=30,
    )
    try:
        wrong.version.get()
        expect(False, "a wrong token is refused")
    except ResourceException as e:
        expect(e.status_code == 401, "a wrong token gets 401")

    print(f"proxmoxer conformance passed (VM {vmid})")


if __name__ == "__main__":
    main()
