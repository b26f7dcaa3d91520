// The ratelimit-client executable (bin/ratelimit-client.js runs the compiled file).
import { runProgram } from '../../common/index.js';
import { main } from './main.js';

runProgram('ratelimit-client', () => main(process.argv.slice(2)));
