export * from './file-provider.js';
