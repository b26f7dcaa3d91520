// The ratelimit-config executable (bin/ratelimit-config.js runs the compiled file).
import { main } from './main.js';

main(process.argv.slice(2)).then((code) => {
  process.exitCode = code;
  // Output is written; a socket a library still holds open (a Redis client closing) must not keep the
  // command alive past its answer.
  setTimeout(() => process.exit(code), 500).unref();
});
