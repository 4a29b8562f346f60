// Preloaded with `node --import` into servers that have no host option (server-everything
// listens on every interface): every TCP listen is pinned to 127.0.0.1, and the bound
// address is reported on stderr as `KOVA_LISTENING <host> <port>` so tests can use port 0.
import net from "node:net";

const originalListen = net.Server.prototype.listen;

net.Server.prototype.listen = function (...args) {
  const callback = typeof args[args.length - 1] === "function" ? args.pop() : undefined;
  let options;
  if (args.length > 0 && typeof args[0] === "object" && args[0] !== null) {
    options = { ...args[0], host: "127.0.0.1" };
  } else if (args.length === 0 || /^\d+$/.test(String(args[0]))) {
    options = { port: args.length === 0 ? 0 : Number(args[0]), host: "127.0.0.1" };
  } else {
    // A pipe or socket path: not a network listener, leave it alone.
    return originalListen.apply(this, callback ? [...args, callback] : args);
  }
  this.once("listening", () => {
    const address = this.address();
    if (address && typeof address === "object") {
      process.stderr.write(`KOVA_LISTENING ${address.address} ${address.port}\n`);
    }
  });
  return originalListen.call(this, options, ...(callback ? [callback] : []));
};
