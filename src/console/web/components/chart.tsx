// One metric curve drawn by uPlot. The chart is created once and fed new points with setData, so live
// updates do not rebuild it; it follows its container's width.
import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';

export interface ChartProps {
  title: string;
  xs: number[];
  ys: (number | null)[];
  color?: string;
  height?: number;
}

export function MetricChart({ title, xs, ys, color = '#e8590c', height = 180 }: ChartProps) {
  const box = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);

  useEffect(() => {
    const el = box.current!;
    const opts: uPlot.Options = {
      width: Math.max(200, el.clientWidth),
      height,
      legend: { show: true },
      cursor: { drag: { x: true, y: false } },
      scales: { x: { time: false } },
      axes: [
        { label: 'step', stroke: 'currentColor', grid: { stroke: 'rgba(128,128,128,0.15)' } },
        { stroke: 'currentColor', grid: { stroke: 'rgba(128,128,128,0.15)' }, size: 60 },
      ],
      series: [{ label: 'step' }, { label: title, stroke: color, width: 2, points: { show: xs.length < 60 }, spanGaps: true }],
    };
    plot.current = new uPlot(opts, [xs, ys], el);
    const resize = new ResizeObserver(() => plot.current?.setSize({ width: Math.max(200, el.clientWidth), height }));
    resize.observe(el);
    return () => {
      resize.disconnect();
      plot.current?.destroy();
      plot.current = null;
    };
  }, [title, height]);

  useEffect(() => {
    plot.current?.setData([xs, ys]);
  }, [xs, ys, xs.length]);

  return (
    <figure class="chart" aria-label={`${title} by step`} data-metric={title} data-points={xs.length}>
      <figcaption>{title}</figcaption>
      <div ref={box} class="chart-box" />
    </figure>
  );
}
