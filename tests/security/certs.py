"""Test certificates made with the openssl CLI in a temp dir: a CA, a
server certificate for 127.0.0.1/localhost (subjectAltName, serverAuth and
clientAuth, so `zeroshard launch` can use it on both sides), a client
certificate, a second (wrong) CA with its own server and client
certificates, and an expired client certificate (signed with `openssl ca`
and a validity in 2020)."""
import pathlib
import subprocess

EXT = ("basicConstraints=CA:FALSE\n"
       "keyUsage=digitalSignature,keyEncipherment\n"
       "extendedKeyUsage=serverAuth,clientAuth\n"
       "subjectAltName=IP:127.0.0.1,DNS:localhost\n")


def _run(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_ca(d, name):
    _run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-sha256", "-days", "30",
         "-subj", f"/CN={name}", "-keyout", f"{name}.key", "-out", f"{name}.pem", cwd=d)


def make_leaf(d, ca, name, days=30):
    _run("req", "-newkey", "rsa:2048", "-nodes", "-sha256", "-subj", f"/CN={name}",
         "-keyout", f"{name}.key", "-out", f"{name}.csr", cwd=d)
    _run("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key",
         "-CAcreateserial", "-sha256", "-days", str(days), "-extfile", "ext.cnf",
         "-out", f"{name}.pem", cwd=d)


def make_expired(d, ca, name):
    (d / "db").mkdir(exist_ok=True)
    (d / "db" / "index.txt").write_text("")
    (d / "db" / "serial").write_text("1000\n")
    (d / "ca.cnf").write_text(
        "[ca]\ndefault_ca=x\n[x]\ndir=db\ndatabase=db/index.txt\nnew_certs_dir=db\n"
        "serial=db/serial\npolicy=p\ndefault_md=sha256\nunique_subject=no\n"
        "[p]\ncommonName=supplied\n")
    _run("req", "-newkey", "rsa:2048", "-nodes", "-sha256", "-subj", f"/CN={name}",
         "-keyout", f"{name}.key", "-out", f"{name}.csr", cwd=d)
    _run("ca", "-batch", "-config", "ca.cnf", "-cert", f"{ca}.pem", "-keyfile", f"{ca}.key",
         "-in", f"{name}.csr", "-out", f"{name}.pem", "-startdate", "20200101000000Z",
         "-enddate", "20200102000000Z", "-extfile", "ext.cnf", cwd=d)


def make_all(d):
    d = pathlib.Path(d)
    (d / "ext.cnf").write_text(EXT)
    make_ca(d, "ca")
    make_ca(d, "wrongca")
    make_leaf(d, "ca", "server")
    make_leaf(d, "ca", "client")
    make_leaf(d, "wrongca", "wrongserver")
    make_leaf(d, "wrongca", "wrongclient")
    make_expired(d, "ca", "expired")
    return d


if __name__ == "__main__":
    # `python3 tests/security/certs.py DIR`: the certificates in DIR (for the
    # benches' --tls-dir: ca.pem, server.pem/.key, client.pem/.key).
    import sys
    pathlib.Path(sys.argv[1]).mkdir(parents=True, exist_ok=True)
    print(make_all(sys.argv[1]))
