// Preload for the MCP conformance CLI in client mode (node --import):
// every TCP listener started without a host binds 127.0.0.1.
//
// Each client scenario starts its own test servers (the MCP server, the
// authorization server) with listen(0) and no host, which binds every
// interface. Passing a host is not enough on its own: Node then resolves it
// with dns.lookup, which answers on a later tick, while the suite reads
// server.address().port on the line after listen(). So for the length of
// that one listen() call, dns.lookup answers IP literals at once, and the
// bind stays synchronous.
import dns from 'node:dns';
import net from 'node:net';

const HOST = '127.0.0.1';
const listen = net.Server.prototype.listen;

// withHost returns listen's arguments with HOST added when a TCP port is
// asked for without a host; other forms (paths, handles) are left alone.
function withHost(args) {
  const [first, second] = args;
  if (first === undefined || typeof first === 'function') {
    return [0, HOST, ...args.filter((a) => a !== undefined)];
  }
  if (typeof first === 'number' || (typeof first === 'string' && /^\d+$/.test(first))) {
    return typeof second === 'string' ? args : [first, HOST, ...args.slice(1)];
  }
  if (first !== null && typeof first === 'object') {
    const o = first;
    const tcp = o.path === undefined && o.handle === undefined && o._handle === undefined && o.fd === undefined;
    return tcp && o.host === undefined ? [{ port: 0, ...o, host: HOST }, ...args.slice(1)] : args;
  }
  return args;
}

net.Server.prototype.listen = function (...args) {
  const lookup = dns.lookup;
  dns.lookup = function (hostname, options, callback) {
    const cb = typeof options === 'function' ? options : callback;
    const opts = typeof options === 'object' && options !== null ? options : {};
    const family = net.isIP(hostname);
    if (family !== 0 && !opts.all) {
      cb(null, hostname, family);
      return {};
    }
    return lookup.call(this, hostname, options, callback);
  };
  try {
    return listen.apply(this, withHost(args));
  } finally {
    dns.lookup = lookup;
  }
};
