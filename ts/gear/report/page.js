// Client side of the GEAR report: builds the rows from the JSON data block (#gear-data) that the
// renderer fills, and recolours them on the metric switch. Plain browser JS, inlined by
// scripts/bundle-assets.mjs; it never reads data from anywhere else.
(function(){
'use strict';
var D=JSON.parse(document.getElementById('gear-data').textContent);
function lerp(a,b,t){return Math.round(a+(b-a)*t);}
// Position of a value on its colour scale, 0..1. Divergence and entropy: log scale, linear below the
// knee (the batch's median nonzero value), so one spike does not wash out the rest. Weight: diverging
// around 1, linear on each side.
function unit(metric,x){
  var dom=D.domain[metric],lo=dom[0],hi=dom[1];
  if(metric==='weight'){
    if(x>=1)return hi>1?0.5+0.5*Math.min((x-1)/(hi-1),1):0.5;
    return lo<1?0.5-0.5*Math.min((1-x)/(1-lo),1):0.5;
  }
  if(!(hi>0)||!(x>0))return 0;
  var c=D.knee[metric];
  return Math.min(Math.log1p(Math.min(x,hi)/c)/Math.log1p(hi/c),1);
}
function colour(metric,x){
  var s=D.scales[metric],t=unit(metric,x);
  var a,b,u;if(t<=0.5){a=s[0];b=s[1];u=t*2;}else{a=s[1];b=s[2];u=(t-0.5)*2;}
  return [lerp(a[0],b[0],u),lerp(a[1],b[1],u),lerp(a[2],b[2],u)];
}
function fmt(x){return Math.abs(x)>=100||x===Math.round(x)?String(x):x.toPrecision(4);}
function short(x){return x===0?'0':Math.abs(x)>=100||x===Math.round(x)?String(Math.round(x*100)/100):x.toPrecision(2);}
function pct(x){return (100*x).toFixed(1)+'%';}
var rowsEl=document.getElementById('rows');
var initial=document.querySelector('input[name=metric][value="'+D.metric+'"]');
if(initial)initial.checked=true;
var toks=[];
var k=0; // index into the per-token arrays, which hold the shown rows' tokens in display order
for(var i=0;i<D.rows;i++){
  var r=D.rowIds[i],b=D.starts[i],len=D.lengths[i],A=D.adv[i];
  var nseg={},nvalid=0;
  var row=document.createElement('section');
  row.className='row '+(A>0?'pos':A<0?'neg':'zero');row.dataset.row=r;
  var head=document.createElement('div');head.className='rowhead';
  var badge=document.createElement('span');badge.className='badge '+(A>0?'pos':A<0?'neg':'zero');
  badge.textContent=(A>0?'+':A<0?'\u2212':'')+fmt(Math.abs(A));
  var body=document.createElement('div');body.className='toks';
  var cur=null,curId=-1;
  for(var j=0;j<len;j++,k++){
    var t=b+j;
    var m=D.mask?D.mask[k]===1:true;if(m)nvalid++;
    var sp=document.createElement('span');
    var txt=D.tokens?D.tokens[k].replace(/\n/g,'\u21b5'):'';
    sp.className='tok'+(D.tokens?'':' cell')+(m?'':' masked');
    sp.textContent=txt===''?'\u2009':txt;
    sp.dataset.t=t;sp.dataset.d=D.d[k];sp.dataset.h=D.h[k];sp.dataset.w=D.w[k];
    var sid=D.seg[k];
    sp.title='token '+t+(m?'':' (masked)')+'\nD = '+fmt(D.d[k])+'\nH = '+fmt(D.h[k])+'\nweight = '+fmt(D.w[k])+'\nadvantage = '+fmt(D.a[k])+(sid>=0?'\nsegment '+sid+(D.anchors[sid]===t?' (anchor)':''):'');
    if(sid>=0){
      nseg[sid]=1;
      if(sid!==curId){cur=document.createElement('span');cur.className='seg';cur.dataset.seg=sid;body.appendChild(cur);curId=sid;}
      if(D.anchors[sid]===t)sp.classList.add('anchor');
      cur.appendChild(sp);
    }else{curId=-1;body.appendChild(sp);}
    if(m)toks.push(sp);
  }
  var ns=Object.keys(nseg).length;
  row.dataset.segments=ns;
  var title=document.createElement('b');title.textContent='row '+r;
  head.appendChild(title);
  head.appendChild(badge);
  var info=document.createElement('span');
  info.textContent=(D.labels?D.labels[i]+' \u00b7 ':'')+len+' tokens, '+nvalid+' valid \u00b7 '+ns+' segment'+(ns===1?'':'s');
  head.appendChild(info);
  var moved=document.createElement('span');moved.className='moved';
  moved.textContent='credit moved '+pct(D.mass[i]>0?D.moved[i]/D.mass[i]:0);
  moved.title="sum over the row's valid tokens of |A'_t - A_row|, divided by |A_row| times its valid tokens";
  row.dataset.moved=D.moved[i];
  head.appendChild(moved);
  row.appendChild(head);row.appendChild(body);rowsEl.appendChild(row);
}
var W=300;
// Tick values of the legend: the ends, and for a log scale the knee and its powers of ten in between.
function ticks(metric){
  var dom=D.domain[metric];
  if(metric==='weight')return dom[0]<1&&dom[1]>1?[dom[0],1,dom[1]]:[dom[0],dom[1]];
  var out=[0],c=D.knee[metric],hi=dom[1];
  for(var v=c;v<hi&&out.length<6;v*=10)out.push(v);
  out.push(hi);
  return out;
}
function key(metric){return metric==='divergence'?'d':metric==='entropy'?'h':'w';}
function paint(metric){
  var k=key(metric);
  for(var i=0;i<toks.length;i++){
    var sp=toks[i],c=colour(metric,Number(sp.dataset[k]));
    sp.style.backgroundColor='rgb('+c[0]+','+c[1]+','+c[2]+')';
    sp.style.color=(0.299*c[0]+0.587*c[1]+0.114*c[2])<140?'#fff':'#111';
  }
  var svg=document.getElementById('legend-bar'),sc=D.scales[metric];
  var ns='http://www.w3.org/2000/svg';
  while(svg.firstChild)svg.removeChild(svg.firstChild);
  function el(name,attrs){var e=document.createElementNS(ns,name);for(var q in attrs)e.setAttribute(q,attrs[q]);svg.appendChild(e);return e;}
  var defs=el('defs',{}),g=document.createElementNS(ns,'linearGradient');
  g.setAttribute('id','lg');
  for(var j=0;j<3;j++){var st=document.createElementNS(ns,'stop');st.setAttribute('offset',(j*50)+'%');st.setAttribute('stop-color','rgb('+sc[j].join(',')+')');g.appendChild(st);}
  defs.appendChild(g);
  el('rect',{x:'0',y:'0',width:String(W),height:'14',fill:'url(#lg)',stroke:'#ccc'});
  // labels at least 34 px apart, 64 px before the end label (right-aligned, with its unit), which always shows
  var tv=ticks(metric),placed=[];
  for(var l=0;l<tv.length;l++){
    var x=Math.round(unit(metric,tv[l])*W);
    if(l===tv.length-1)while(placed.length>1&&x-placed[placed.length-1].x<64)placed.pop();
    else if(placed.length&&x-placed[placed.length-1].x<34)continue;
    placed.push({x:x,v:tv[l]});
  }
  for(var p=0;p<placed.length;p++){
    var px=placed[p].x,anchor=px<=0?'start':px>=W?'end':'middle';
    el('line',{x1:String(px),x2:String(px),y1:'14',y2:'18',stroke:'#777'});
    var tx=el('text',{x:String(px),y:'29','font-size':'11','text-anchor':anchor,fill:'#555'});
    tx.textContent=short(placed[p].v)+(p===placed.length-1&&metric==='divergence'?' nats':'');
  }
  document.getElementById('legend-note').textContent=metric==='weight'
    ?'final weight: linear, white at 1'
    :(metric==='divergence'?'divergence D':'entropy H')+': log scale, linear below '+short(D.knee[metric])+' (the median nonzero value)';
  document.body.dataset.metric=metric;
}
var radios=document.querySelectorAll('input[name=metric]');
for(var q=0;q<radios.length;q++)radios[q].addEventListener('change',function(ev){paint(ev.target.value);});
document.getElementById('only-seg').addEventListener('change',function(ev){
  var rs=document.querySelectorAll('.row');
  for(var i=0;i<rs.length;i++)rs[i].classList.toggle('hidden',ev.target.checked&&rs[i].dataset.segments==='0');
});
paint(D.metric);
})();
