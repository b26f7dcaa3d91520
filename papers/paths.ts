import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

// Source files live in papers/; the build puts the compiled ones in papers/dist/. Data and the web page are
// not compiled, so both resolve to the package folder.
const here = dirname(fileURLToPath(import.meta.url));
export const PAPERS_DIR = existsSync(join(here, 'public')) ? here : resolve(here, '..');

export const DEFAULT_DATA = join(PAPERS_DIR, 'data', 'papers.jsonl');
export const GLOVE_WORDS = join(PAPERS_DIR, 'data', 'glove-100d.words.txt');
export const GLOVE_VECTORS = join(PAPERS_DIR, 'data', 'glove-100d.i16');
export const PUBLIC_DIR = join(PAPERS_DIR, 'public');
