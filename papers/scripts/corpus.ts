// Seeded synthetic corpus: papers over ten distinct research topics with realistic titles, abstracts, authors,
// venues, years, keywords and citation counts. Text only; generate-dataset.ts adds the vectors and 2-D points.
import { rng } from '../text.js';

export interface Topic {
  name: string;
  field: string;
  venues: string[];
  years: [number, number];
  keywords: string[];
  methods: string[];
  tasks: string[];
  data: string[];
  objects: string[];
  challenges: string[];
  metrics: string[];
  applications: string[];
}

export const TOPICS: Topic[] = [
  {
    name: 'graph learning',
    field: 'machine learning on graphs',
    venues: ['NeurIPS', 'ICLR', 'KDD'],
    years: [2016, 2023],
    keywords: [
      'graph neural networks',
      'node classification',
      'link prediction',
      'message passing',
      'graph representation learning',
      'knowledge graphs',
      'deep learning',
      'over-smoothing',
    ],
    methods: [
      'graph attention network',
      'message passing neural network',
      'graph convolutional network',
      'spectral graph filter',
      'hierarchical graph pooling',
      'graph transformer',
    ],
    tasks: [
      'node classification',
      'link prediction',
      'graph classification',
      'community detection',
      'molecular property prediction',
      'knowledge graph completion',
    ],
    data: [
      'citation networks',
      'social networks',
      'molecular graphs',
      'knowledge graphs',
      'heterogeneous graphs',
      'protein interaction networks',
    ],
    objects: [
      'node embeddings',
      'neighbourhood aggregation',
      'edge features',
      'graph structure',
      'higher-order motifs',
      'relational patterns',
    ],
    challenges: [
      'over-smoothing in deep architectures',
      'heterophily',
      'scalability to large graphs',
      'noisy edges',
    ],
    metrics: ['accuracy', 'mean reciprocal rank', 'macro F1'],
    applications: ['drug discovery', 'recommendation', 'fraud detection', 'traffic forecasting'],
  },
  {
    name: 'computer vision',
    field: 'computer vision',
    venues: ['CVPR', 'ICCV', 'ECCV'],
    years: [2010, 2023],
    keywords: [
      'object detection',
      'semantic segmentation',
      'convolutional neural networks',
      'image recognition',
      'vision transformers',
      'deep learning',
      'self-supervised learning',
      'pose estimation',
    ],
    methods: [
      'convolutional neural network',
      'feature pyramid network',
      'vision transformer',
      'region proposal network',
      'contrastive pretraining',
      'encoder decoder architecture',
    ],
    tasks: [
      'object detection',
      'semantic segmentation',
      'image classification',
      'human pose estimation',
      'depth estimation',
      'instance segmentation',
    ],
    data: [
      'natural images',
      'street scenes',
      'aerial imagery',
      'video frames',
      'medical images',
      'point clouds',
    ],
    objects: [
      'visual features',
      'bounding boxes',
      'pixel labels',
      'spatial attention maps',
      'image patches',
      'multiscale representations',
    ],
    challenges: ['small objects', 'occlusion', 'domain shift', 'limited annotations'],
    metrics: ['mean average precision', 'intersection over union', 'top-1 accuracy'],
    applications: ['autonomous driving', 'medical imaging', 'surveillance', 'robotics'],
  },
  {
    name: 'natural language processing',
    field: 'natural language processing',
    venues: ['ACL', 'EMNLP', 'NAACL'],
    years: [2012, 2023],
    keywords: [
      'language models',
      'machine translation',
      'question answering',
      'text classification',
      'word embeddings',
      'transformers',
      'deep learning',
      'summarization',
    ],
    methods: [
      'pretrained language model',
      'sequence to sequence model',
      'transformer encoder',
      'retrieval augmented generator',
      'recurrent neural network',
      'contextual word embedding',
    ],
    tasks: [
      'machine translation',
      'question answering',
      'abstractive summarization',
      'sentiment analysis',
      'named entity recognition',
      'natural language inference',
    ],
    data: [
      'news articles',
      'parallel corpora',
      'dialogue transcripts',
      'scientific text',
      'social media posts',
      'multilingual benchmarks',
    ],
    objects: [
      'token representations',
      'attention weights',
      'syntactic structure',
      'sentence embeddings',
      'lexical semantics',
      'discourse relations',
    ],
    challenges: ['low-resource languages', 'hallucinated content', 'long documents', 'spurious correlations'],
    metrics: ['BLEU', 'exact match', 'ROUGE'],
    applications: ['search engines', 'digital assistants', 'content moderation', 'education'],
  },
  {
    name: 'reinforcement learning',
    field: 'reinforcement learning',
    venues: ['ICML', 'NeurIPS', 'CoRL'],
    years: [2013, 2023],
    keywords: [
      'reinforcement learning',
      'policy optimization',
      'robotics',
      'exploration',
      'multi-agent systems',
      'imitation learning',
      'model-based control',
      'reward shaping',
    ],
    methods: [
      'policy gradient method',
      'actor critic algorithm',
      'model-based planner',
      'deep Q network',
      'offline policy optimization',
      'hierarchical policy',
    ],
    tasks: [
      'robotic manipulation',
      'continuous control',
      'multi-agent coordination',
      'navigation',
      'game playing',
      'sequential decision making',
    ],
    data: [
      'simulated environments',
      'Atari games',
      'robot demonstrations',
      'offline datasets',
      'physics simulators',
      'real robot trials',
    ],
    objects: [
      'value functions',
      'reward signals',
      'state representations',
      'action sequences',
      'exploration bonuses',
      'learned dynamics models',
    ],
    challenges: ['sparse rewards', 'sample inefficiency', 'distribution shift', 'unsafe exploration'],
    metrics: ['average return', 'success rate', 'sample efficiency'],
    applications: ['warehouse automation', 'autonomous vehicles', 'energy management', 'healthcare'],
  },
  {
    name: 'databases',
    field: 'data management',
    venues: ['SIGMOD', 'VLDB', 'ICDE'],
    years: [2005, 2023],
    keywords: [
      'query optimization',
      'transaction processing',
      'indexing',
      'data management',
      'cardinality estimation',
      'column stores',
      'distributed databases',
      'data integration',
    ],
    methods: [
      'cost-based query optimizer',
      'learned index structure',
      'multiversion concurrency control',
      'vectorized execution engine',
      'adaptive join algorithm',
      'sampling-based estimator',
    ],
    tasks: [
      'query optimization',
      'cardinality estimation',
      'transaction processing',
      'join processing',
      'data cleaning',
      'schema matching',
    ],
    data: [
      'relational workloads',
      'analytical benchmarks',
      'transactional workloads',
      'data lakes',
      'streaming data',
      'spatial datasets',
    ],
    objects: [
      'query plans',
      'index structures',
      'storage layouts',
      'lock contention',
      'join orders',
      'materialized views',
    ],
    challenges: [
      'skewed data distributions',
      'high contention',
      'correlated predicates',
      'evolving workloads',
    ],
    metrics: ['throughput', 'query latency', 'estimation error'],
    applications: ['business intelligence', 'online retail', 'financial systems', 'scientific archives'],
  },
  {
    name: 'computer security',
    field: 'computer security',
    venues: ['USENIX Security', 'CCS', 'IEEE S&P'],
    years: [2006, 2023],
    keywords: [
      'malware detection',
      'intrusion detection',
      'cryptography',
      'privacy',
      'vulnerability analysis',
      'fuzzing',
      'side channels',
      'authentication',
    ],
    methods: [
      'coverage-guided fuzzer',
      'static binary analysis',
      'anomaly-based intrusion detector',
      'symbolic execution engine',
      'differential privacy mechanism',
      'secure multiparty protocol',
    ],
    tasks: [
      'malware detection',
      'vulnerability discovery',
      'intrusion detection',
      'privacy-preserving analytics',
      'side channel mitigation',
      'password authentication',
    ],
    data: [
      'network traffic',
      'malware samples',
      'system call traces',
      'firmware images',
      'web applications',
      'mobile apps',
    ],
    objects: [
      'memory corruption bugs',
      'attack surfaces',
      'execution traces',
      'cryptographic keys',
      'access control policies',
      'malicious payloads',
    ],
    challenges: ['evasive attackers', 'false alarms', 'path explosion', 'encrypted traffic'],
    metrics: ['detection rate', 'false positive rate', 'code coverage'],
    applications: ['enterprise networks', 'embedded devices', 'cloud platforms', 'online banking'],
  },
  {
    name: 'computational biology',
    field: 'computational biology',
    venues: ['Bioinformatics', 'RECOMB', 'ISMB'],
    years: [2005, 2023],
    keywords: [
      'protein structure prediction',
      'genomics',
      'gene expression',
      'sequence alignment',
      'single-cell analysis',
      'drug discovery',
      'phylogenetics',
      'bioinformatics',
    ],
    methods: [
      'hidden Markov model',
      'sequence alignment algorithm',
      'protein language model',
      'probabilistic graphical model',
      'variational autoencoder',
      'clustering pipeline',
    ],
    tasks: [
      'protein structure prediction',
      'gene expression analysis',
      'variant calling',
      'cell type annotation',
      'phylogenetic inference',
      'protein function prediction',
    ],
    data: [
      'genome sequences',
      'single-cell transcriptomes',
      'protein sequences',
      'clinical cohorts',
      'gene regulatory networks',
      'mass spectrometry data',
    ],
    objects: [
      'amino acid contacts',
      'gene regulatory modules',
      'mutations',
      'expression profiles',
      'evolutionary signals',
      'binding sites',
    ],
    challenges: ['sequencing noise', 'batch effects', 'sparse measurements', 'small cohorts'],
    metrics: ['prediction accuracy', 'adjusted rand index', 'area under the curve'],
    applications: ['precision medicine', 'vaccine design', 'cancer research', 'agriculture'],
  },
  {
    name: 'visualization',
    field: 'information visualization',
    venues: ['IEEE VIS', 'CHI', 'EuroVis'],
    years: [2005, 2023],
    keywords: [
      'visualization',
      'visual analytics',
      'user studies',
      'human-computer interaction',
      'dimensionality reduction',
      'interactive systems',
      'storytelling',
      'perception',
    ],
    methods: [
      'interactive visual analytics system',
      'linked view interface',
      'glyph-based design',
      'scatterplot matrix technique',
      'narrative visualization framework',
      'projection-based overview',
    ],
    tasks: [
      'exploratory data analysis',
      'literature exploration',
      'visual comparison',
      'text visualization',
      'uncertainty visualization',
      'dashboard design',
    ],
    data: [
      'high-dimensional data',
      'document collections',
      'time series',
      'multivariate tables',
      'citation data',
      'geospatial data',
    ],
    objects: [
      'visual encodings',
      'user interactions',
      'colour scales',
      'clusters and outliers',
      'analytic provenance',
      'perceptual judgments',
    ],
    challenges: ['visual clutter', 'cognitive load', 'scalability of displays', 'misleading charts'],
    metrics: ['task completion time', 'error rate', 'user preference'],
    applications: ['scientific discovery', 'journalism', 'public health', 'education'],
  },
  {
    name: 'distributed systems',
    field: 'distributed systems',
    venues: ['OSDI', 'NSDI', 'EuroSys'],
    years: [2005, 2023],
    keywords: [
      'distributed systems',
      'consensus',
      'fault tolerance',
      'cloud computing',
      'replication',
      'scheduling',
      'serverless computing',
      'storage systems',
    ],
    methods: [
      'Byzantine fault tolerant protocol',
      'Raft-based replication scheme',
      'decentralized scheduler',
      'geo-replicated storage system',
      'serverless runtime',
      'erasure coding layer',
    ],
    tasks: [
      'state machine replication',
      'cluster scheduling',
      'distributed storage',
      'failure recovery',
      'load balancing',
      'stream processing',
    ],
    data: [
      'datacenter traces',
      'cloud workloads',
      'microservice deployments',
      'wide-area networks',
      'production clusters',
      'key-value workloads',
    ],
    objects: [
      'replica consistency',
      'leader election',
      'tail latency',
      'network partitions',
      'resource allocation',
      'checkpoint state',
    ],
    challenges: ['partial failures', 'stragglers', 'network partitions', 'bursty load'],
    metrics: ['tail latency', 'throughput', 'availability'],
    applications: ['online services', 'financial ledgers', 'video streaming', 'scientific computing'],
  },
  {
    name: 'quantum computing',
    field: 'quantum computing',
    venues: ['Quantum', 'PRX Quantum', 'QIP'],
    years: [2008, 2023],
    keywords: [
      'quantum computing',
      'quantum algorithms',
      'error correction',
      'qubits',
      'quantum circuits',
      'variational algorithms',
      'quantum simulation',
      'entanglement',
    ],
    methods: [
      'variational quantum eigensolver',
      'surface code decoder',
      'quantum approximate optimization algorithm',
      'circuit compilation pass',
      'tensor network simulator',
      'randomized benchmarking protocol',
    ],
    tasks: [
      'quantum error correction',
      'circuit compilation',
      'quantum chemistry simulation',
      'combinatorial optimization',
      'qubit calibration',
      'entanglement verification',
    ],
    data: [
      'superconducting qubits',
      'trapped ions',
      'noisy intermediate-scale devices',
      'random circuits',
      'molecular Hamiltonians',
      'photonic processors',
    ],
    objects: [
      'logical qubits',
      'gate errors',
      'circuit depth',
      'entangled states',
      'decoherence',
      'measurement outcomes',
    ],
    challenges: ['decoherence', 'limited qubit connectivity', 'barren plateaus', 'readout noise'],
    metrics: ['logical error rate', 'gate fidelity', 'approximation ratio'],
    applications: ['materials science', 'cryptanalysis', 'logistics', 'chemistry'],
  },
];

const FIRST =
  'Alice Wei Maria Jun Omar Sofia Daniel Priya Lukas Chen Fatima Noah Elena Hiroshi Grace Mateo Aisha Ivan Laura Kenji Sara Tomas Nadia Ravi Olga Samuel Yuki Carlos Hannah Ahmed Julia Min Pedro Leila Erik Ana'.split(
    ' ',
  );
const LAST =
  'Smith Zhang Garcia Müller Kim Patel Rossi Nguyen Johansson Kowalski Silva Tanaka Novak Haddad Okafor Dubois Ivanova Costa Schmidt Park Singh Lopez Fischer Hansen Moreau Yamamoto Ali Brown Li Wang Cohen Rahman Jensen Sato'.split(
    ' ',
  );

const ADJ = [
  'Scalable',
  'Robust',
  'Efficient',
  'Interpretable',
  'Adaptive',
  'Unified',
  'Lightweight',
  'Principled',
  'Fast',
  'Accurate',
];
const VERBS = ['captures', 'exploits', 'models', 'learns', 'aggregates', 'refines', 'compresses', 'aligns'];
const FINDINGS = [
  'the gains are largest on {challenge}',
  'performance degrades gracefully under {challenge}',
  'simple baselines remain competitive when data is abundant',
  'the learned {object} transfer across domains',
  'most errors stem from {challenge}',
];

const cap = (s: string) => s.charAt(0).toUpperCase() + s.slice(1);
const titleCase = (s: string) =>
  s
    .split(' ')
    .map((w, i) =>
      i > 0 && ['for', 'of', 'with', 'via', 'and', 'in', 'on', 'the', 'a', 'to'].includes(w) ? w : cap(w),
    )
    .join(' ');

export interface TextPaper {
  ID: string;
  Title: string;
  Authors: string[];
  Source: string;
  Year: number;
  Abstract: string;
  Keywords: string[];
  CitationCounts: number;
  topic: number;
}

/** Generates `perTopic` papers for each topic, deterministically from `seed`. */
export function generateCorpus(seed = 42, perTopic = 30): TextPaper[] {
  const r = rng(seed);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(r() * xs.length)];
  const pickN = <T>(xs: readonly T[], n: number): T[] => {
    const pool = [...xs];
    const out: T[] = [];
    while (out.length < n && pool.length) out.push(pool.splice(Math.floor(r() * pool.length), 1)[0]);
    return out;
  };
  const titles = new Set<string>();
  const out: TextPaper[] = [];
  for (let ti = 0; ti < TOPICS.length; ti++) {
    const t = TOPICS[ti];
    for (let k = 0; k < perTopic; k++) {
      let title = '';
      let method = '';
      let task = '';
      for (let attempt = 0; attempt < 50 && (!title || titles.has(title.toLowerCase())); attempt++) {
        method = pick(t.methods);
        task = pick(t.tasks);
        const data = pick(t.data);
        const obj = pick(t.objects);
        const adj = pick(ADJ);
        title = titleCase(
          pick([
            `${adj} ${method} for ${task}`,
            `${task} with ${adj.toLowerCase()} ${obj}`,
            `towards ${adj.toLowerCase()} ${task} on ${data}`,
            `learning ${obj} for ${task}`,
            `${adj.toLowerCase()} ${task} via ${method}`,
            `rethinking ${obj} in ${task}`,
            `${task} under ${pick(t.challenges)}`,
            `an empirical study of ${method} on ${data}`,
          ]),
        );
      }
      titles.add(title.toLowerCase());
      const [d1, d2] = pickN(t.data, 2);
      const [o1, o2, o3] = pickN(t.objects, 3);
      const [a1, a2] = pickN(t.applications, 2);
      const challenge = pick(t.challenges);
      const baseline = pick(t.methods.filter((m) => m !== method));
      const fill = (s: string) =>
        s.replace('{challenge}', pick(t.challenges)).replace('{object}', pick(t.objects));
      const sentences = [
        `${cap(task)} is a central problem in ${t.field}, with applications in ${a1} and ${a2}.`,
        `Existing approaches based on the ${baseline} struggle with ${challenge}.`,
        `In this paper we propose a ${pick(ADJ).toLowerCase()} ${method} that ${pick(VERBS)} ${o1} and ${o2}.`,
        `Our approach ${pick(VERBS)} ${o3} while remaining efficient on ${d1}.`,
        `We evaluate it on ${d1} and ${d2}, where it improves ${pick(t.metrics)} by ${(2 + r() * 18).toFixed(1)} percent over strong baselines.`,
        `We further analyse ${pick(t.objects)} and find that ${fill(pick(FINDINGS))}.`,
      ];
      if (r() < 0.5) sentences.push('Code and data are publicly available.');
      const kws = pickN(t.keywords, 3 + Math.floor(r() * 3));
      if (r() < 0.2)
        kws.push(pick(TOPICS[(ti + 1 + Math.floor(r() * (TOPICS.length - 1))) % TOPICS.length].keywords));
      const year = t.years[0] + Math.floor(r() ** 0.7 * (t.years[1] - t.years[0] + 1));
      const age = 2024 - year;
      const cites = Math.floor(Math.exp(1 + r() * 3.5) * Math.sqrt(age));
      const nAuthors = 2 + Math.floor(r() * 4);
      out.push({
        ID: '',
        Title: title,
        Authors: Array.from({ length: nAuthors }, () => `${pick(FIRST)} ${pick(LAST)}`),
        Source: pick(t.venues),
        Year: Math.min(year, t.years[1]),
        Abstract: sentences.join(' '),
        Keywords: [...new Set(kws)],
        CitationCounts: cites,
        topic: ti,
      });
    }
  }
  // Shuffle so IDs do not reveal topics, then number them.
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(r() * (i + 1));
    [out[i], out[j]] = [out[j], out[i]];
  }
  out.forEach((p, i) => (p.ID = `P${String(i + 1).padStart(4, '0')}`));
  return out;
}
