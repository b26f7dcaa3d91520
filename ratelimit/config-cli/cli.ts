// The ratelimit-config executable (bin/ratelimit-config.js runs the compiled file).
import { main } from './main.js';

main(process.argv.slice(2)).then((code) => {
  process.exitCode = code;
});
