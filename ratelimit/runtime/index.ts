export * from './file-provider.js';
export * from './yaml-parser.js';
