import { main } from './main.js';

main(process.argv.slice(2)).then((code) => process.exit(code));
